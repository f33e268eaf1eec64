/**
 * The reference harness collects its young generation when it goes idle (no turn running in any
 * session), so the scavenge a turn's allocations call for lands between turns instead of inside
 * the next one. It needs `gc`, which Node exposes under `--expose-gc` (in the reference command).
 */
import { execFileSync } from "node:child_process";
import { setImmediate as nextLoopTurn } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { idleCollector } from "../../runner-host/reference-harness/idle-gc.ts";
import { REFERENCE_HARNESS_COMMAND } from "../../scripts/build-harness.ts";

const g = globalThis as { gc?: unknown };
const saved = g.gc;
afterEach(() => {
  g.gc = saved;
});

function fakeGc() {
  const calls: unknown[] = [];
  g.gc = (options: unknown) => calls.push(options);
  return calls;
}

describe("reference harness idle collection", () => {
  it("collects the young generation once per loop turn after a turn ends with nothing running", async () => {
    const calls = fakeGc();
    const turnEnded = idleCollector(() => false);
    turnEnded();
    turnEnded(); // two sessions ending in one loop turn: one collection
    expect(calls).toEqual([]); // not before the turn's end is written (the output batch's setImmediate)
    await nextLoopTurn();
    expect(calls).toEqual([{ type: "minor" }]);
    turnEnded();
    await nextLoopTurn();
    expect(calls).toHaveLength(2);
  });

  it("does not collect while another session's turn is running", async () => {
    const calls = fakeGc();
    let running = true;
    const turnEnded = idleCollector(() => running);
    turnEnded();
    await nextLoopTurn();
    expect(calls).toEqual([]);
    running = false;
    turnEnded();
    await nextLoopTurn();
    expect(calls).toHaveLength(1);
  });

  it("does nothing without --expose-gc", async () => {
    g.gc = undefined;
    const turnEnded = idleCollector(() => false);
    turnEnded();
    await nextLoopTurn();
    expect(g.gc).toBeUndefined();
  });

  it("runs a real minor collection under the reference command's flags", () => {
    const flags = REFERENCE_HARNESS_COMMAND.slice(1, -1);
    expect(flags).toContain("--expose-gc");
    const module = fileURLToPath(new URL("../../runner-host/reference-harness/idle-gc.ts", import.meta.url));
    const script = `
      const { PerformanceObserver } = await import("node:perf_hooks");
      const { constants } = await import("node:perf_hooks");
      const { idleCollector } = await import(${JSON.stringify(module)});
      let minor = 0;
      const obs = new PerformanceObserver((l) => { for (const e of l.getEntries()) if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MINOR) minor++; });
      obs.observe({ entryTypes: ["gc"] });
      idleCollector(() => false)();
      setTimeout(() => { obs.disconnect(); process.stdout.write(String(minor)); }, 50);
    `;
    const out = execFileSync(process.execPath, [...flags, "--input-type=module", "-e", script], { encoding: "utf8" });
    expect(Number(out)).toBeGreaterThanOrEqual(1);
  });
});
