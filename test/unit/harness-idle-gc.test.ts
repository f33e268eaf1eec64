/**
 * The reference harness collects its young generation when it goes idle (no turn running in any
 * session), so the scavenge a turn calls for lands between turns instead of inside the next one.
 * It needs `gc`, which Node exposes under `--expose-gc` (in the reference harness command).
 */
import { execFileSync } from "node:child_process";
import { setImmediate as nextLoopTurn } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { idleCollector } from "../../runner-host/reference-harness/idle-gc.ts";
import { REFERENCE_HARNESS_COMMAND } from "../../scripts/build-harness.ts";

function fakeGc() {
  const calls: unknown[] = [];
  return { calls, gc: (options: unknown) => void calls.push(options) };
}

describe("reference harness idle collection", () => {
  it("collects once per loop turn after a turn ends with nothing running", async () => {
    const { calls, gc } = fakeGc();
    const turnEnded = idleCollector(() => false, gc);
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
    const turnEnded = idleCollector(() => running, gc);
    turnEnded();
    await nextLoopTurn();
    expect(calls).toEqual([]);
    running = false;
    turnEnded();
    await nextLoopTurn();
    expect(calls).toHaveLength(1);
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

  it("runs a real minor collection under the reference command's flags", () => {
    const flags = REFERENCE_HARNESS_COMMAND.slice(1, -1);
    expect(flags).toContain("--expose-gc");
    const module = fileURLToPath(new URL("../../runner-host/reference-harness/idle-gc.ts", import.meta.url));
    // Counts the minor collections from the collector's call on; a sentinel collection made after
    // it has run (a later setImmediate) ends the count: entries arrive in order, so every earlier
    // one has been seen when the sentinel's is.
    const script = (busy: boolean) => `
      const { PerformanceObserver, constants, performance } = await import("node:perf_hooks");
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
      gc({ type: "minor" }); // start from an empty young generation; counted from here on
      from = performance.now();
      idleCollector(() => ${busy})();
      setImmediate(() => setImmediate(() => { sentinel = performance.now(); gc({ type: "minor" }); }));
    `;
    const run = (busy: boolean) => {
      const out = execFileSync(process.execPath, [...flags, "--input-type=module", "-e", script(busy)], { encoding: "utf8", timeout: 10_000 });
      expect(out).toMatch(/^\d+$/);
      return Number(out);
    };
    expect(run(false)).toBe(1);
    expect(run(true)).toBe(0); // a turn still running: left to V8
  });
});
