/**
 * The scheduling-trace reader behind `npm run bench:handoffs`: perf's lines become events, events
 * become per-CPU spans (a missing idle → task switch restored at the task's wake-up), and a window
 * over them gives each thread's CPU time, the idle CPU time and the time a runnable thread waited
 * on a busy CPU while another was idle.
 */
import { describe, expect, it } from "vitest";
import { parseSched, spans, windows } from "../../bench/sched-trace.ts";

const sw = (t: string, cpu: number, prev: number, state: string, next: number) =>
  `  x ${prev} [00${cpu}] ${t}: sched:sched_switch: prev_comm=x prev_pid=${prev} prev_prio=120 prev_state=${state} ==> next_comm=y next_pid=${next} next_prio=120`;
const wk = (t: string, cpu: number, pid: number, target: number) =>
  `  x 1 [00${cpu}] ${t}: sched:sched_wakeup: comm=z pid=${pid} prio=120 target_cpu=00${target}`;

describe("scheduling trace windows", () => {
  it("reads switches, wake-ups and migrations from perf script lines and skips the rest", () => {
    const events = parseSched(
      [
        sw("10.000100", 0, 0, "R", 7),
        wk("10.000200", 0, 8, 1),
        "  x 1 [000] 10.000300: sched:sched_migrate_task: comm=z pid=8 prio=120 orig_cpu=1 dest_cpu=0",
        "  x 1 [000] 10.000400: sched:sched_stat_runtime: comm=x pid=7 runtime=100 [ns]",
      ].join("\n"),
    );
    expect(events).toEqual([
      { t: 10.0001, cpu: 0, kind: "switch", prev: 0, prevRunnable: true, next: 7 },
      { t: 10.0002, cpu: 0, kind: "wakeup", pid: 8, target: 1 },
      { t: 10.0003, cpu: 0, kind: "migrate", pid: 8, dest: 0 },
    ]);
  });

  it("counts a thread queued behind a busy CPU while the other idles, and each thread's CPU time", () => {
    // CPU 0 runs 7 from 0 to 4 ms; 8 wakes onto CPU 0 at 1 ms and runs there from 4 ms; CPU 1 idles.
    const text = [sw("1.000", 0, 0, "R", 7), sw("1.000", 1, 5, "S", 0), wk("1.001", 0, 8, 0), sw("1.004", 0, 7, "S", 8), sw("1.006", 0, 8, "S", 0)].join("\n");
    const [w] = windows(spans(parseSched(text), 2), [[1.0, 1.006]], (tid) => `t${tid}`);
    expect(w!.ms).toBeCloseTo(6);
    expect(w!.queuedMs).toBeCloseTo(3);
    expect(w!.idleCpuMs).toBeCloseTo(6);
    expect(w!.cpuMs.get("t7")).toBeCloseTo(4);
    expect(w!.cpuMs.get("t8")).toBeCloseTo(2);
  });

  it("restores a missing switch from idle at the thread's wake-up, so its run is not counted from the idle start", () => {
    // CPU 1 goes idle at 0; 9 wakes onto it at 2 ms; perf lost the idle → 9 switch; 9 leaves at 3 ms.
    const text = [sw("2.000", 0, 0, "R", 4), sw("2.000", 1, 5, "S", 0), wk("2.002", 0, 9, 1), sw("2.003", 1, 9, "S", 0), sw("2.004", 0, 4, "S", 0)].join("\n");
    const [w] = windows(spans(parseSched(text), 2), [[2.0, 2.004]], (tid) => `t${tid}`);
    expect(w!.cpuMs.get("t9")).toBeCloseTo(1);
    expect(w!.idleCpuMs).toBeCloseTo(3);
    expect(w!.queuedMs).toBeCloseTo(0);
  });
});
