/**
 * Global setup of the projects that start the reference harness (unit, fuzz, e2e): builds it from
 * the current sources, so no test runs an older build (scripts/build-harness.ts rewrites only the
 * files whose bytes differ, so projects starting together leave the same files in place). It also
 * gives the test processes one directory for the harness roots they make (test/unit/harness-helpers.ts
 * `rootDir`), removed at the end of the run: test processes can end without running exit handlers.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildHarness } from "../scripts/build-harness.ts";

export async function setup(): Promise<() => void> {
  await buildHarness();
  const dir = mkdtempSync(join(tmpdir(), "svc-harness-test-"));
  process.env.SVC_TEST_HARNESS_ROOTS = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}
