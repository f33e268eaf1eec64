/**
 * The reference harness's batched output: one stdout write per event-loop turn with consecutive
 * deltas merged, except a turn's first delta, which is its first output and goes at once.
 */
import { setImmediate as nextLoopTurn } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import type { HarnessOutput } from "../../runner-host/harness/protocol.ts";
import { OutputBatch } from "../../runner-host/reference-harness/out-batch.ts";

const S = "s1";
const T1 = "a".repeat(32);
const T2 = "b".repeat(32);
const delta = (turn: string, text: string): HarnessOutput => ({ type: "assistant.delta", session: S, turn, text });
const end = (turn: string): HarnessOutput => ({ type: "turn.end", session: S, turn, status: "completed" });

function recorder() {
  const writes: string[] = [];
  const batch = new OutputBatch((text) => writes.push(text));
  const lines = () => writes.join("").split("\n").filter(Boolean).map((l) => JSON.parse(l) as HarnessOutput & { text?: string });
  return { writes, batch, lines };
}

describe("reference harness batched output", () => {
  it("writes a turn's first delta at once, then merges the deltas of one loop turn into one line", async () => {
    const { writes, batch, lines } = recorder();
    batch.queue(delta(T1, "He"));
    expect(writes).toHaveLength(1); // before the loop turn ends: first output waits for nothing
    batch.queue(delta(T1, "ll"));
    batch.queue(delta(T1, "o"));
    expect(writes).toHaveLength(1);
    await nextLoopTurn();
    expect(writes).toHaveLength(2);
    expect(lines().map((l) => l.text)).toEqual(["He", "llo"]);
  });

  it("keeps the order when other output is queued ahead of a turn's first delta", async () => {
    const { writes, batch, lines } = recorder();
    batch.queue(end(T1));
    batch.queue(delta(T2, "x"));
    expect(writes).toHaveLength(0);
    await nextLoopTurn();
    expect(lines().map((l) => l.type)).toEqual(["turn.end", "assistant.delta"]);
  });

  it("writes the next turn's first delta at once again, and the joined text is unchanged", async () => {
    const { writes, batch, lines } = recorder();
    batch.queue(delta(T1, "a"));
    batch.queue(delta(T1, "b"));
    batch.queue(end(T1));
    await nextLoopTurn();
    const before = writes.length;
    batch.queue(delta(T2, "c"));
    expect(writes).toHaveLength(before + 1);
    batch.queue(delta(T2, "d"));
    await nextLoopTurn();
    const texts = (turn: string) => lines().filter((l) => l.type === "assistant.delta" && l.turn === turn).map((l) => l.text).join("");
    expect([texts(T1), texts(T2)]).toEqual(["ab", "cd"]);
    expect(lines().map((l) => l.type)).toEqual(["assistant.delta", "assistant.delta", "turn.end", "assistant.delta", "assistant.delta"]);
  });
});
