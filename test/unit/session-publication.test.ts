/**
 * Publication of a session's events (src/session/publication.ts): one message to live subscribers
 * with recorded and live-only events in order, then what the publication ends (inspection streams
 * of calls that got their result, executors' work on them, live streams of a closed session).
 */
import { describe, expect, it } from "vitest";
import type { Event } from "../../src/shared/api-schema.ts";
import { Publication, type Recorded } from "../../src/session/publication.ts";
import type { SessionRow } from "../../src/session/record.ts";
import { sessionRow } from "./session-row.ts";

type Step = [string, unknown?];

function rig(row: SessionRow | undefined = sessionRow({ status: "running" })) {
  const steps: Step[] = [];
  const publication = new Publication({
    state: {
      require: () => {
        if (!row) throw new Error("session not found");
        return row;
      },
      withCursor: (_r, seq, e) => ({ ...e, cursor: `cursor-${seq}` }),
    },
    subs: {
      publish: (events) => void steps.push(["publish", events]),
      endCall: (call) => void steps.push(["endCall", call]),
      endLive: () => void steps.push(["endLive"]),
    },
    calls: { ended: (ids) => void steps.push(["ended", ids]) },
    env: {},
    keepAlive: () => void steps.push(["keepAlive"]),
  });
  return { publication, steps };
}

let n = 0;
function event(type: string, data: Record<string, unknown> = {}): Event {
  return { id: `e${++n}`, type, time: "2026-01-01T00:00:00.000Z", data, input_id: "input-1" } as Event;
}

function recorded(seq: number, e: Event): Recorded {
  return { seq, event: e, bytes: 100 };
}

describe("publication", () => {
  it("sends recorded events with their cursors and live-only ones as they are, in one message, in order", () => {
    const { publication, steps } = rig();
    const a = event("assistant.message", { text: "hi" });
    const delta = event("assistant.delta", { text: "h" });
    const call = event("tool.call", { id: "call-1", name: "t", arguments: {} });
    publication.publish([recorded(7, a), delta, recorded(8, call)]);
    expect(steps).toEqual([["publish", [{ ...a, cursor: "cursor-7" }, delta, { ...call, cursor: "cursor-8" }]]]);
  });

  it("does nothing for nothing, even where there is no session", () => {
    const { publication, steps } = rig(undefined);
    publication.publish([]);
    expect(steps).toEqual([]);
  });

  it("ends the inspection streams of each call whose tool.result was recorded, and tells executors, after the events went out", () => {
    const { publication, steps } = rig();
    const r1 = event("tool.result", { call_id: "call-1", result: { content: [] } });
    const status = event("session.status", { status: "idle" });
    const r2 = event("tool.result", { call_id: "call-2", result: { content: [] } });
    publication.publish([recorded(1, r1), recorded(2, status), recorded(3, r2)]);
    expect(steps.map((s) => s[0])).toEqual(["publish", "endCall", "endCall", "ended"]);
    expect(steps.slice(1)).toEqual([["endCall", "call-1"], ["endCall", "call-2"], ["ended", ["call-1", "call-2"]]]);
  });

  it("ends every live stream of a closed session after its final events", () => {
    const { publication, steps } = rig(sessionRow({ status: "closed" }));
    const closed = event("session.status", { status: "closed" });
    publication.publish([recorded(4, closed)]);
    expect(steps).toEqual([["publish", [{ ...closed, cursor: "cursor-4" }]], ["endLive"]]);
  });

  it("ends nothing for live-only events: only recorded ones change what streams follow", () => {
    const { publication, steps } = rig(sessionRow({ status: "closed" }));
    const progress = event("tool.progress", { call_id: "call-1", data: {} });
    publication.publish([progress]);
    expect(steps).toEqual([["publish", [progress]]]);
  });
});
