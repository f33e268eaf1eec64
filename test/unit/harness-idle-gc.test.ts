/**
 * The reference harness collects its young generation when it goes idle (no turn running in any
 * session) with less than half of a semi-space free, so the scavenge a turn calls for lands between
 * turns instead of inside the next one, and trims a grown young generation once it stays quiet, so
 * an idle process gives back what a busy stretch took. Both need `gc`, which Node exposes under
 * `--expose-gc` (in the reference harness command).
 */
import { execFileSync } from "node:child_process";
import { setImmediate as nextLoopTurn } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { idleCollector, TRIM_WORK_FACTOR } from "../../runner-host/reference-harness/idle-gc.ts";
import { REFERENCE_HARNESS_COMMAND } from "../../scripts/build-harness.ts";

function fakeGc() {
  const calls: unknown[] = [];
  return { calls, gc: (options: unknown) => void calls.push(options) };
}

describe("reference harness idle collection", () => {
  it("collects once per loop turn after a turn ends with nothing running", async () => {
    const { calls, gc } = fakeGc();
    const turnEnded = idleCollector(() => false, { gc, young: () => ({ size: 2, room: 0 }) });
    turnEnded();
    turnEnded(); // two sessions ending in one loop turn: one collection
    expect(calls).toEqual([]); // not before the turn's end is written (the output batch's setImmediate)
    await nextLoopTurn();
    expect(calls).toEqual([{ type: "minor" }]);
    turnEnded();
    await nextLoopTurn();
    expect(calls).toHaveLength(2);
  });

  it("does not collect while another turn is running", async () => {
    const { calls, gc } = fakeGc();
    let running = true;
    const turnEnded = idleCollector(() => running, { gc, young: () => ({ size: 2, room: 0 }) });
    turnEnded();
    await nextLoopTurn();
    expect(calls).toEqual([]);
    running = false;
    turnEnded();
    await nextLoopTurn();
    expect(calls).toHaveLength(1);
  });

  it("leaves a young generation alone while over half of its semi-space is free for the next turn", async () => {
    const { calls, gc } = fakeGc();
    const semi = 8 << 20;
    let room = semi / 2 + 1;
    const turnEnded = idleCollector(() => false, { gc, young: () => ({ size: 2 * semi, room }) });
    turnEnded();
    await nextLoopTurn();
    expect(calls).toEqual([]);
    room = semi / 2 - 1;
    turnEnded();
    await nextLoopTurn();
    expect(calls).toEqual([{ type: "minor" }]);
  });

  it("does nothing without --expose-gc", async () => {
    const saved = (globalThis as { gc?: unknown }).gc;
    (globalThis as { gc?: unknown }).gc = undefined;
    try {
      let asked = 0;
      const turnEnded = idleCollector(() => (asked++, false));
      turnEnded();
      await nextLoopTurn();
      expect(asked).toBe(0); // nothing was scheduled: no collection to decide on
    } finally {
      (globalThis as { gc?: unknown }).gc = saved;
    }
  });

  describe("the trim of a grown young generation", () => {
    afterEach(() => void vi.useRealTimers());
    const QUIET = 1_000;
    const IDLE = 60_000;
    const TRIM_COST = 10;

    /** A collector on fake timers whose young generation and CPU clock the test sets; a trim costs TRIM_COST ms. */
    function rig(busy = () => false) {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setImmediate"] });
      const state = { young: 1, cpu: 0, trims: 0, minors: 0, full: [] as unknown[] };
      const gc = (o: { type: string; flavor?: string }) => {
        if (o.type === "minor") return void state.minors++;
        state.full.push(o);
        if (o.flavor !== "last-resort") return;
        state.trims++;
        state.cpu += TRIM_COST;
        state.young = 1;
      };
      const turnEnded = idleCollector(busy, { gc, young: () => ({ size: state.young, room: 0 }), cpuMs: () => state.cpu, quietMs: QUIET, idleMs: IDLE });
      /** A turn that did `work` ms of CPU and grew the young generation, ended with nothing running. */
      const turn = (work: number) => {
        state.cpu += work;
        state.young = 16;
        turnEnded();
        vi.advanceTimersByTime(0); // the idle collection's setImmediate
      };
      return { state, turn };
    }

    it("trims once the harness is quiet, and not before", () => {
      const { state, turn } = rig();
      turn(5);
      expect(state).toMatchObject({ minors: 1, trims: 0 });
      vi.advanceTimersByTime(QUIET - 1);
      expect(state.trims).toBe(0);
      vi.advanceTimersByTime(1);
      expect(state).toMatchObject({ trims: 1, young: 1 });
      // The memory-reducing collection, then an ordinary one that sets the old generation's limit back.
      expect(state.full).toEqual([{ type: "major", flavor: "last-resort" }, { type: "major" }]);
    });

    it("a turn ending during the quiet time restarts it", () => {
      const { state, turn } = rig();
      turn(5);
      vi.advanceTimersByTime(QUIET - 1);
      turn(TRIM_COST * TRIM_WORK_FACTOR);
      vi.advanceTimersByTime(QUIET - 1);
      expect(state.trims).toBe(0);
      vi.advanceTimersByTime(1);
      expect(state.trims).toBe(1);
    });

    it("after a trim, waits for the long quiet unless the work since pays for another quick one", () => {
      const { state, turn } = rig();
      turn(5);
      vi.advanceTimersByTime(QUIET);
      expect(state.trims).toBe(1);
      // Less work than TRIM_WORK_FACTOR trims' worth: only after the long quiet.
      turn(TRIM_COST * TRIM_WORK_FACTOR - 1);
      vi.advanceTimersByTime(IDLE - 1);
      expect(state.trims).toBe(1);
      vi.advanceTimersByTime(1);
      expect(state.trims).toBe(2);
      // Enough work: the quick trim again.
      turn(TRIM_COST * TRIM_WORK_FACTOR);
      vi.advanceTimersByTime(QUIET);
      expect(state.trims).toBe(3);
    });

    it("does not trim while a turn runs, nor a young generation that has not grown", () => {
      let running = false;
      const { state, turn } = rig(() => running);
      turn(5);
      running = true; // another session's turn started during the quiet time
      vi.advanceTimersByTime(IDLE);
      expect(state.trims).toBe(0);
      running = false;
      turn(5);
      state.young = 1; // already back at its start size (V8 shrank it on its own)
      vi.advanceTimersByTime(IDLE);
      expect(state.trims).toBe(0);
    });
  });

  it("gives a grown young generation back under the reference command's flags", () => {
    const flags = REFERENCE_HARNESS_COMMAND.slice(1, -1);
    const module = fileURLToPath(new URL("../../runner-host/reference-harness/idle-gc.ts", import.meta.url));
    // Grows the young generation the way a long reply does (many short-lived objects, some kept a
    // while), ends a "turn", and reports the young generation's size once the trim has run.
    const script = `
      const { getHeapSpaceStatistics } = await import("node:v8");
      const { idleCollector } = await import(${JSON.stringify(module)});
      const young = () => getHeapSpaceStatistics().find((s) => s.space_name === "new_space").space_size;
      const turnEnded = idleCollector(() => false, { quietMs: 10 });
      const start = young();
      let kept = [];
      for (let i = 0; i < 3e6; i++) { const o = { i, s: "x" + i }; if (i % 50 === 0) kept.push(o); if (kept.length > 4000) kept = []; }
      const grown = young();
      turnEnded();
      const poll = setInterval(() => {
        if (young() > start) return;
        clearInterval(poll);
        process.stdout.write(JSON.stringify({ start, grown, after: young() }));
      }, 5);
    `;
    const out = execFileSync(process.execPath, [...flags, "--input-type=module", "-e", script], { encoding: "utf8", timeout: 10_000 });
    const { start, grown, after } = JSON.parse(out) as Record<string, number>;
    expect(grown).toBeGreaterThanOrEqual(4 * start); // the young generation did grow
    expect(after).toBe(start);
  });

  it("runs a real minor collection under the reference command's flags", () => {
    const flags = REFERENCE_HARNESS_COMMAND.slice(1, -1);
    expect(flags).toContain("--expose-gc");
    const module = fileURLToPath(new URL("../../runner-host/reference-harness/idle-gc.ts", import.meta.url));
    // Counts the minor collections from the collector's call on; a sentinel collection made after
    // it has run (a later setImmediate) ends the count: entries arrive in order, so every earlier
    // one has been seen when the sentinel's is.
    const script = (busy: boolean, fill: boolean) => `
      const { PerformanceObserver, constants, performance } = await import("node:perf_hooks");
      const { getHeapSpaceStatistics } = await import("node:v8");
      const young = () => getHeapSpaceStatistics().find((s) => s.space_name === "new_space");
      const { idleCollector } = await import(${JSON.stringify(module)});
      let from = Infinity, sentinel = Infinity, minor = 0;
      const obs = new PerformanceObserver((l) => {
        for (const e of l.getEntries()) {
          if (e.detail.kind !== constants.NODE_PERFORMANCE_GC_MINOR) continue;
          if (e.startTime >= sentinel) { obs.disconnect(); clearInterval(alive); process.stdout.write(String(minor)); return; }
          if (e.startTime >= from) minor++;
        }
      });
      obs.observe({ entryTypes: ["gc"] });
      // The entries are delivered on a later wake-up of the event loop, which nothing else here
      // causes before V8's own 8 s timer: a 10 ms tick keeps the wait short.
      const alive = setInterval(() => {}, 10);
      gc({ type: "minor" }); // start from an empty young generation
      // A turn's worth of allocation that leaves less than half of the semi-space free (a
      // scavenge V8 makes on its own meanwhile empties it, and the filling goes on).
      let kept = [];
      while (${fill} && young().space_available_size >= young().space_size / 4) for (let i = 0; i < 1000; i++) kept.push({ i });
      kept = null;
      from = performance.now(); // counted from here on
      idleCollector(() => ${busy})();
      setImmediate(() => setImmediate(() => { sentinel = performance.now(); gc({ type: "minor" }); }));
    `;
    const run = (busy: boolean, fill = true) => {
      const out = execFileSync(process.execPath, [...flags, "--input-type=module", "-e", script(busy, fill)], { encoding: "utf8", timeout: 10_000 });
      expect(out).toMatch(/^\d+$/);
      return Number(out);
    };
    expect(run(false)).toBe(1);
    expect(run(true)).toBe(0); // a turn still running: left to V8
    expect(run(false, false)).toBe(0); // room for the next turn: nothing to collect yet
  });
});
