/**
 * The chaos judge (chaos/judge.ts): a stream that matches its log and a log whose turns end as
 * docs/api.md "Turns" says pass; each kind of violation is counted where docs/testing.md puts it.
 */
import { describe, expect, it } from "vitest";
import type { Event } from "../../src/shared/api-schema.ts";
import { judgeSession, violations, type SessionObservation } from "../../chaos/judge.ts";

let n = 0;
const ev = (type: string, data: Record<string, unknown>, input_id?: string): Event => {
  n++;
  const id = n.toString(16).padStart(32, "0");
  return { id, type, time: "2026-11-23T00:00:00.000Z", data, cursor: `c${n}`, ...(input_id ? { input_id } : {}) };
};

/** A session with a completed tool turn, then a turn that failed, a resume and an idle turn. */
function history(): { log: Event[]; turns: string[] } {
  const m1 = ev("user.message", { type: "user.message", text: "a", delivery: "queue" });
  const m2 = ev("user.message", { type: "user.message", text: "b", delivery: "queue" });
  const m3 = ev("user.message", { type: "user.message", text: "c", delivery: "queue" });
  const log = [
    m1,
    ev("session.status", { status: "running" }, m1.id),
    ev("tool.call", { id: "call_1", name: "echo", arguments: {} }, m1.id),
    ev("tool.result", { call_id: "call_1", result: { content: [] } }, m1.id),
    ev("assistant.message", { text: "ok", usage: {}, stop_reason: "stop" }, m1.id),
    ev("session.status", { status: "idle" }, m1.id),
    m2,
    ev("session.status", { status: "running" }, m2.id),
    ev("session.error", { code: "service_error", message: "the harness process exited" }, m2.id),
    ev("session.status", { status: "failed" }),
    ev("session.status", { status: "idle" }),
    m3,
    ev("session.status", { status: "running" }, m3.id),
    ev("session.status", { status: "idle" }, m3.id),
  ];
  return { log, turns: [m1.id, m2.id, m3.id] };
}

const observe = (log: Event[], o: Partial<SessionObservation> = {}): SessionObservation => ({
  session: "s",
  streamed: log,
  accepted: log.filter((e) => e.type === "user.message").map((e) => e.id),
  log,
  finalStatus: "idle",
  expectIdle: new Set(),
  ...o,
});

describe("chaos judge", () => {
  it("a stream equal to its log, every turn ending in a documented end state: no violation", () => {
    const { log, turns } = history();
    const v = judgeSession(observe(log, { expectIdle: new Set([turns[0]!, turns[2]!]) }));
    expect(violations(v)).toBe(0);
    expect(v.outcomes).toEqual({ idle: 2, "failed/service_error": 1 });
  });

  it("an event the stream never delivered, or an accepted message missing from the log, is lost", () => {
    const { log } = history();
    expect(judgeSession(observe(log, { streamed: log.filter((_, i) => i !== 4) })).lost).toBe(1);
    expect(judgeSession(observe(log, { accepted: ["f".repeat(32)] })).lost).toBe(1);
  });

  it("an event streamed twice (a resume that replayed it) is doubled", () => {
    const { log } = history();
    const v = judgeSession(observe(log, { streamed: [...log.slice(0, 6), log[5]!, ...log.slice(6)] }));
    expect({ doubled: v.doubled, total: violations(v) }).toEqual({ doubled: 1, total: 1 });
  });

  it("a stream out of the log's order, or with another cursor, is misplaced", () => {
    const { log } = history();
    const swapped = [...log];
    [swapped[3], swapped[4]] = [swapped[4]!, swapped[3]!];
    expect(judgeSession(observe(log, { streamed: swapped })).misplaced).toBe(1);
    expect(judgeSession(observe(log, { streamed: log.map((e, i) => (i === 2 ? { ...e, cursor: "other" } : e)) })).misplaced).toBe(1);
  });

  it("an error code followed by a status the state table does not allow is a bad end", () => {
    const { log } = history();
    const wrong = log.map((e) => (e.type === "session.status" && e.data.status === "failed" ? { ...e, data: { status: "interrupted" } } : e));
    expect(judgeSession(observe(wrong)).badEnds).toBe(1);
  });

  it("a turn that never ends, a tool.call without its tool.result, or events after the end are bad ends", () => {
    const { log } = history();
    expect(judgeSession(observe(log.slice(0, -1), { finalStatus: "running" })).badEnds).toBe(1);
    expect(judgeSession(observe(log.filter((e) => e.type !== "tool.result"))).badEnds).toBe(1);
    const late = ev("assistant.message", { text: "late", usage: {}, stop_reason: "stop" }, log[0]!.id);
    expect(judgeSession(observe([...log, late])).badEnds).toBe(1);
  });

  it("a session.error without a following session.status, or a final status unlike the log's, is a bad end", () => {
    const { log } = history();
    expect(judgeSession(observe(log.filter((e) => !(e.type === "session.status" && e.data.status === "failed")))).badEnds).toBeGreaterThanOrEqual(1);
    expect(judgeSession(observe(log, { finalStatus: "failed" })).badEnds).toBe(1);
  });

  it("a turn expected to end idle that failed (in a documented end state) is harmed, not a bad end", () => {
    const { log, turns } = history();
    const v = judgeSession(observe(log, { expectIdle: new Set([turns[1]!]) }));
    expect({ harmed: v.harmed, badEnds: v.badEnds }).toEqual({ harmed: 1, badEnds: 0 });
  });
});
