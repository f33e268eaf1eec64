/**
 * The grace a lost runner link gets (src/session/link-grace.ts): a closed socket of the current
 * lease, or a new instance that finds no socket, starts it; the alarm at its end loses the
 * runner-host unless the link came back. While a turn runs the alarm keeps watching (a restart of the
 * service's process ends the link without a close, and the alarm is what wakes the new instance).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { LINK_GRACE_MS, LinkGrace, RUNNING_WATCH_MS } from "../../src/session/link-grace.ts";
import type { SessionRow } from "../../src/session/record.ts";
import { sessionRow } from "./session-row.ts";

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const LOST = "the runner-host running this session was lost (its link did not come back)";

/** Sockets are names; each carries the lease it was accepted with. */
function rig(patch: Partial<SessionRow> = {}) {
  const r = {
    row: sessionRow({ lease: 3, link_state: "open", ...patch }),
    leases: { old: 2, current: 3 } as Record<string, number>,
    /** The current lease's open socket, if any. */
    socket: undefined as string | undefined,
    alarms: [] as number[],
    lost: [] as string[],
    running: false,
    grace: undefined as unknown as LinkGrace<string>,
  };
  r.grace = new LinkGrace<string>({
    state: { row: () => r.row, set: (fields) => void (r.row = { ...r.row, ...fields }) },
    link: { socket: () => r.socket, leaseOf: (ws) => r.leases[ws]! },
    arm: async (at) => void r.alarms.push(at),
    lose: (message) => void r.lost.push(message),
    running: () => r.running,
  });
  return r;
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(T0);
});
afterEach(() => {
  vi.useRealTimers();
});

describe("a lost runner link's grace", () => {
  it("starts when the current lease's socket closes: the loss is recorded and the alarm armed for the grace's end", async () => {
    const r = rig();
    await r.grace.closed("current");
    expect(r.row.link_lost_at).toBe(T0);
    expect(r.alarms).toEqual([T0 + LINK_GRACE_MS]);
  });

  it("does not start for an old lease's socket, a link let go, or while another socket of the lease is up", async () => {
    const old = rig();
    await old.grace.closed("old");
    const released = rig({ link_state: "none" });
    await released.grace.closed("current");
    const replaced = rig();
    replaced.socket = "current-2";
    await replaced.grace.closed("current");
    for (const r of [old, released, replaced]) expect([r.row.link_lost_at, r.alarms]).toEqual([null, []]);
  });

  it("at an alarm within the grace, waits on to the grace's end; at its end, loses the runner-host", async () => {
    const r = rig({ link_lost_at: T0 });
    vi.setSystemTime(T0 + 4_000);
    await r.grace.check();
    expect(r.alarms).toEqual([T0 + LINK_GRACE_MS]);
    expect(r.lost).toEqual([]);
    vi.setSystemTime(T0 + LINK_GRACE_MS);
    await r.grace.check();
    expect(r.lost).toEqual([LOST]);
    expect(r.alarms).toHaveLength(1);
  });

  it("loses nothing at the alarm when the link came back, or was never lost", async () => {
    const back = rig({ link_lost_at: T0 });
    back.socket = "current";
    const fine = rig();
    vi.setSystemTime(T0 + LINK_GRACE_MS * 2);
    await back.grace.check();
    await fine.grace.check();
    expect([back.lost, back.alarms, fine.lost, fine.alarms]).toEqual([[], [], [], []]);
  });

  it("is started by a new instance that finds an opening or open link without its socket", async () => {
    for (const link_state of ["opening", "open"] as const) {
      const r = rig({ link_state });
      await r.grace.noticeLost();
      expect([r.row.link_lost_at, r.alarms]).toEqual([T0, [T0 + LINK_GRACE_MS]]);
    }
  });

  it("is not started anew by a new instance for a link only requested, already lost, or with its socket up", async () => {
    const requested = rig({ link_state: "requested" });
    const lost = rig({ link_lost_at: T0 - 5_000 });
    const up = rig();
    up.socket = "current";
    for (const r of [requested, lost, up]) await r.grace.noticeLost();
    expect([requested.row.link_lost_at, lost.row.link_lost_at, up.row.link_lost_at]).toEqual([null, T0 - 5_000, null]);
    expect([requested.alarms, lost.alarms, up.alarms]).toEqual([[], [], []]);
  });

  it(`while a turn runs on a live link the alarm watches again in RUNNING_WATCH_MS (${RUNNING_WATCH_MS} ms); with nothing running it is not re-armed`, async () => {
    const r = rig();
    r.socket = "current";
    r.running = true;
    await r.grace.watch();
    await r.grace.check();
    r.running = false;
    await r.grace.check();
    expect([r.alarms, r.lost]).toEqual([[T0 + RUNNING_WATCH_MS, T0 + RUNNING_WATCH_MS], []]);
  });
});
