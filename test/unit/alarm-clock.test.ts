/**
 * The session object's alarm (src/session/alarm-clock.ts): armed for the soonest moment asked for,
 * reading the runtime's alarm store only when this instance does not know the alarm's time.
 */
import { describe, expect, it } from "vitest";
import { AlarmClock, type AlarmStore } from "../../src/session/alarm-clock.ts";

/** An alarm store that records every call; `gate` holds reads until released. */
function store(initial: number | null = null) {
  const calls: string[] = [];
  let alarm = initial;
  let fail = false;
  let hold: Promise<void> | undefined;
  const s: AlarmStore & { calls: string[]; alarm(): number | null; consume(): void; failNext(): void; holdReads(): () => void } = {
    calls,
    alarm: () => alarm,
    /** The runtime runs the alarm: it is gone from the store. */
    consume: () => void (alarm = null),
    failNext: () => void (fail = true),
    holdReads() {
      let release!: () => void;
      hold = new Promise((r) => (release = r));
      return () => ((hold = undefined), release());
    },
    async getAlarm() {
      calls.push("get");
      const seen = alarm;
      await hold;
      return seen;
    },
    async setAlarm(at) {
      calls.push(`set ${at}`);
      if (fail) throw ((fail = false), new Error("storage failed"));
      alarm = at;
    },
  };
  return s;
}

describe("the session object's alarm", () => {
  it("reads the alarm store once, then arms only for a sooner moment without reading again", async () => {
    const s = store();
    const clock = new AlarmClock(s);
    await clock.arm(1_000);
    await clock.arm(5_000);
    await clock.arm(1_000);
    await clock.arm(400);
    expect(s.calls).toEqual(["get", "set 1000", "set 400"]);
    expect(s.alarm()).toBe(400);
  });

  it("keeps an alarm the instance found set and due sooner", async () => {
    const s = store(200);
    const clock = new AlarmClock(s);
    await clock.arm(1_000);
    expect(s.calls).toEqual(["get"]);
    expect(s.alarm()).toBe(200);
  });

  it("forgets the fired alarm when its handler starts, and reads again at the next arm", async () => {
    const s = store();
    const clock = new AlarmClock(s);
    await clock.arm(1_000);
    // The runtime consumed the alarm at 1000; the handler arms the next one.
    s.consume();
    await clock.firing(() => clock.arm(3_000));
    await clock.arm(3_000);
    expect(s.calls).toEqual(["get", "set 1000", "get", "set 3000"]);
  });

  it("forgets the alarm's time when the handler fails (the runtime retries it on its own schedule)", async () => {
    const s = store();
    const clock = new AlarmClock(s);
    s.consume();
    await expect(
      clock.firing(async () => {
        await clock.arm(2_000);
        throw new Error("handler failed");
      }),
    ).rejects.toThrow("handler failed");
    await clock.arm(9_000);
    expect(s.calls).toEqual(["get", "set 2000", "get"]);
  });

  it("forgets the alarm's time when setting it failed", async () => {
    const s = store();
    const clock = new AlarmClock(s);
    s.failNext();
    await expect(clock.arm(1_000)).rejects.toThrow("storage failed");
    await clock.arm(1_000);
    expect(s.calls).toEqual(["get", "set 1000", "get", "set 1000"]);
    expect(s.alarm()).toBe(1_000);
  });

  it("arms that meet during the first read end at the soonest moment: a read that returns after another arm set the alarm does not undo it", async () => {
    const s = store();
    const clock = new AlarmClock(s);
    const release = s.holdReads();
    const soon = clock.arm(3_000);
    const late = clock.arm(8_000);
    release();
    await Promise.all([soon, late]);
    await clock.arm(5_000);
    expect(s.alarm()).toBe(3_000);
    expect(s.calls.filter((c) => c === "get")).toHaveLength(2);
  });
});
