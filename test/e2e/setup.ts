/**
 * Every e2e test fails when a response or SSE frame it received broke the OpenAPI contract, and a
 * failed test prints what its stacks logged while it ran (JSON lines, no bodies): a failure seen
 * only in CI can then be read from CI's output.
 */
import { afterEach, beforeEach, expect } from "vitest";
import { violations } from "../helpers/contract.ts";
import { startedStacks } from "../helpers/stack.ts";

/** The most of a stack's log a failure prints, characters: the last minutes of a busy stack. */
const FAILURE_LOG_CHARS = 200_000;

beforeEach(({ onTestFailed }) => {
  const marks = new Map([...startedStacks].map((s) => [s, s.mark()]));
  onTestFailed(() => {
    for (const s of startedStacks) {
      const from = marks.get(s) ?? 0; // a stack started during the test: its whole log
      if (s.mark() === from) continue;
      const log = s.stderr().slice(Math.max(from, s.mark() - FAILURE_LOG_CHARS));
      process.stderr.write(`--- the log of the stack at ${s.url} during the failed test ---\n${log}\n--- end of its log ---\n`);
    }
  });
});

afterEach(() => {
  const seen = violations.splice(0);
  expect(seen, "responses that break openapi.json").toEqual([]);
});
