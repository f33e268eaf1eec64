/**
 * The reference harness warms a new process up after `init` (runner-host/reference-harness/warm-up.ts):
 * throwaway turns against a canned reply inside the process, so a new session's first turn in a
 * spare process does not pay for lazy loading. It must stay invisible: no output line, no request
 * to any provider, and the first real turn behaves exactly like any other.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { wantsWarmUp } from "../../runner-host/reference-harness/warm-up.ts";
import { EVENT_TIMEOUT_MS, EventLog, initCommand, ok, startHarness, type Started } from "./harness-helpers.ts";

let provider: ScriptedProvider;
let started: Started;
const logs: Record<string, unknown>[] = [];
const listeners = new Set<(r: Record<string, unknown>) => void>();

beforeAll(async () => {
  provider = await startScriptedProvider();
  started = await startHarness({ log: (r) => (logs.push(r), listeners.forEach((l) => l(r))) });
});

afterAll(async () => {
  await started?.hp.kill();
  await provider?.close();
});

/** Resolves with the first log record matching `pred`, as it is logged. */
function logged(pred: (r: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  const seen = logs.find(pred);
  if (seen) return Promise.resolve(seen);
  return new Promise((resolve, reject) => {
    const listener = (r: Record<string, unknown>) => {
      if (!pred(r)) return;
      listeners.delete(listener);
      clearTimeout(deadline);
      resolve(r);
    };
    const deadline = setTimeout(() => (listeners.delete(listener), reject(new Error("no matching log record"))), EVENT_TIMEOUT_MS);
    listeners.add(listener);
  });
}

describe("reference harness warm-up of a new process", () => {
  it("runs after init without writing an output line or calling the provider, then the first real turn is ordinary", async () => {
    await ok(started.hp, initCommand(provider.url));
    const line = await logged((r) => r.msg === "harness stderr" && String(r.line).includes('"warm-up finished"'));
    const note = JSON.parse(String(line.line)) as { turns: number; ms: number };
    expect(note.turns).toBe(2);
    expect(provider.requests).toHaveLength(0);
    // Anything unexpected on stdout would have been logged by HarnessProcess as a warning or worse.
    expect(logs.filter((r) => r.level === "warn" || r.level === "error")).toEqual([]);

    const log = new EventLog(started.hp, "first");
    await ok(started.hp, { op: "open", session: "first", model: "openai/gpt-4o-mini", tools: [] });
    await ok(started.hp, { op: "run", session: "first", turn: "t1", text: "[[deltas 3 size=2]]" });
    const end = await log.next("turn.end");
    expect(end.status).toBe("completed");
    const text = log.events.flatMap((e) => (e.type === "assistant.delta" ? [e.text] : [])).join("");
    expect(text).toBe("aabbcc");
    expect(provider.requests).toHaveLength(1);
  });

  it("is wanted only for transports that go through the OpenAI SDK", () => {
    expect(wantsWarmUp(new Set(["openai-completions"]))).toBe(true);
    expect(wantsWarmUp(new Set(["anthropic-messages", "openai-responses"]))).toBe(true);
    expect(wantsWarmUp(new Set(["anthropic-messages", "google-generative-ai"]))).toBe(false);
  });
});
