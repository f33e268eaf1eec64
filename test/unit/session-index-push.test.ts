/**
 * The tenant index push policy of a session (src/session/index-push.ts; docs/design-notes.md):
 * pushes nobody waits on are at least INDEX_INTERVAL_MS apart (a timer at the interval's end, with
 * the object's alarm as a backstop) and gathered with other sessions' into one commit, urgent ones
 * are written at once, a failure is retried by an alarm, and the version marked indexed is the one
 * pushed.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Session } from "../../src/shared/api-schema.ts";
import { INDEX_BACKSTOP_MS, INDEX_INTERVAL_MS, INDEX_RETRY_MS, IndexPush } from "../../src/session/index-push.ts";
import { toSession, type SessionRow } from "../../src/session/record.ts";
import { sessionRow } from "./session-row.ts";

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);

/** `first`: the session row (null: no session). */
function rig(first: SessionRow | null = sessionRow({ version: 2, indexed_version: 1 })) {
  const r = {
    row: first ?? undefined,
    marked: [] as number[],
    alarms: [] as number[],
    upserts: [] as { tenant: string; id: string; version: number; session: Session }[],
    /** The versions of `upserts` that went as gathered pushes (TenantObject.gather), not at once. */
    gathered: [] as number[],
    stubsMade: 0,
    /** When set, the next upsert waits for it. */
    hold: undefined as Promise<void> | undefined,
    fail: undefined as Error | undefined,
    push: undefined as unknown as IndexPush,
  };
  r.push = new IndexPush({
    state: { row: () => r.row, markIndexed: (v) => void r.marked.push(v) },
    arm: async (at) => void r.alarms.push(at),
    index: (tenant) => {
      r.stubsMade++;
      const upsert = async (id: string, version: number, body: string) => {
        if (r.hold) await r.hold;
        if (r.fail) throw r.fail;
        r.upserts.push({ tenant, id, version, session: JSON.parse(body) as Session });
      };
      return { upsert, gather: async (id, version, body) => (await upsert(id, version, body), r.gathered.push(version)) };
    },
  });
  return r;
}

/** A change committed: the row's version moves on past what the index holds. */
function change(r: ReturnType<typeof rig>, patch: Partial<SessionRow> = {}): void {
  r.row = { ...r.row!, ...patch, version: r.row!.version + 1, indexed_version: r.marked.at(-1) ?? r.row!.indexed_version };
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date", "setTimeout", "clearTimeout"] });
  vi.setSystemTime(T0);
});
afterEach(() => {
  vi.useRealTimers();
});

describe("tenant index push", () => {
  it("pushes a change at once when nothing was pushed lately, gathered with other sessions', and marks the version pushed", async () => {
    const r = rig();
    await r.push.push();
    expect(r.upserts).toEqual([{ tenant: "acme", id: r.row!.id, version: 2, session: toSession(r.row!) }]);
    expect(r.gathered).toEqual([2]);
    expect(r.marked).toEqual([2]);
    expect(r.alarms).toEqual([]);
  });

  it("pushes nothing when the index holds the row's version, or there is no session", async () => {
    const held = rig(sessionRow({ version: 3, indexed_version: 3 }));
    await held.push.push(true);
    const none = rig(null);
    await none.push.push(true);
    expect([held.upserts, held.alarms, none.upserts, none.alarms]).toEqual([[], [], [], []]);
  });

  it("leaves changes inside the interval to one timer at its end, which pushes the row as it is then; the alarm is the backstop", async () => {
    const r = rig();
    await r.push.push();
    await vi.advanceTimersByTimeAsync(400);
    change(r, { status: "running" });
    await r.push.push();
    await vi.advanceTimersByTimeAsync(300);
    change(r, { status: "idle" });
    await r.push.push();
    expect(r.upserts).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(1);
    // Armed once, with the timer, unless an alarm comes sooner (the object's `arm`): a running
    // turn's watch already does.
    expect(r.alarms).toEqual([T0 + 400 + INDEX_BACKSTOP_MS]);

    await vi.advanceTimersByTimeAsync(INDEX_INTERVAL_MS - 701);
    expect(Date.now()).toBe(T0 + INDEX_INTERVAL_MS - 1);
    expect(r.upserts).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(r.upserts.map((u) => [u.version, u.session.status])).toEqual([
      [2, "idle"],
      [4, "idle"],
    ]);
    expect(r.marked).toEqual([2, 4]);
    expect(vi.getTimerCount()).toBe(0);
    expect(r.gathered).toEqual([2, 4]);
  });

  it("an instance gone before its timer leaves the push owed, and the backstop alarm pushes it", async () => {
    const r = rig();
    await r.push.push();
    vi.setSystemTime(T0 + 400);
    change(r, { status: "running" });
    await r.push.push();
    // A new instance (eviction, restart): no timer, the owed version is in the row.
    const owed = r.row!;
    const next = rig(owed);
    vi.setSystemTime(T0 + 400 + INDEX_BACKSTOP_MS);
    await next.push.push(true); // the object's alarm
    expect(next.upserts.map((u) => [u.version, u.session.status])).toEqual([[owed.version, "running"]]);
    expect(next.marked).toEqual([owed.version]);
  });

  it("writes an urgent change inside the interval at once (not gathered), and pushes a change at the interval's end without an alarm", async () => {
    const r = rig();
    await r.push.push();
    vi.setSystemTime(T0 + 10);
    change(r, { status: "closed" });
    await r.push.push(true);
    vi.setSystemTime(T0 + 10 + INDEX_INTERVAL_MS);
    change(r);
    await r.push.push();
    expect(r.upserts.map((u) => u.version)).toEqual([2, 3, 4]);
    expect(r.alarms).toEqual([]);
    expect(r.gathered).toEqual([2, 4]);
  });

  it("arms a retry INDEX_RETRY_MS after a failed push and leaves the version owed", async () => {
    const r = rig();
    r.fail = new Error("tenant object unreachable");
    await r.push.push(true);
    expect(r.marked).toEqual([]);
    expect(r.alarms).toEqual([T0 + INDEX_RETRY_MS]);

    vi.setSystemTime(T0 + INDEX_RETRY_MS);
    r.fail = undefined;
    await r.push.push(true); // the retry alarm
    expect(r.upserts.map((u) => u.version)).toEqual([2]);
    expect(r.marked).toEqual([2]);
  });

  it("marks the version it pushed, not one committed while the push was in flight", async () => {
    const r = rig();
    let release!: () => void;
    r.hold = new Promise((resolve) => (release = resolve));
    const pushing = r.push.push(true);
    change(r);
    release();
    await pushing;
    expect(r.upserts.map((u) => u.version)).toEqual([2]);
    expect(r.marked).toEqual([2]);
  });

  it("names the TenantObject once per instance", async () => {
    const r = rig();
    for (let i = 0; i < 3; i++) {
      change(r);
      await r.push.push(true);
    }
    expect(r.upserts).toHaveLength(3);
    expect(r.stubsMade).toBe(1);
  });
});
