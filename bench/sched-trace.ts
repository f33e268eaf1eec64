/**
 * Reads `perf script` output of `perf sched record` (sched_switch, sched_wakeup, sched_migrate_task
 * events) into per-CPU run intervals, and lays time windows over them: for each window, the CPU
 * time each thread spent in it, the idle CPU time, and the time a runnable thread sat queued on a
 * busy CPU while another CPU was idle.
 *
 * perf drops some idle → task switches (on this box ~15% of them): a thread seen switching out of
 * a CPU the trace last showed idle is taken to have started there at its last wake-up (or, without
 * one, at the switch itself). Wake-ups aimed at an idle CPU count as queued only on a busy CPU, so a
 * halted vCPU's own wake-up time is not counted as a wait.
 */

export type SchedEvent =
  | { t: number; cpu: number; kind: "switch"; prev: number; prevRunnable: boolean; next: number }
  | { t: number; cpu: number; kind: "wakeup"; pid: number; target: number }
  | { t: number; cpu: number; kind: "migrate"; pid: number; dest: number };

const HEAD = /^\s*.+?\s+(\d+)\s+\[(\d+)\]\s+(\d+\.\d+):\s+sched:(sched_switch|sched_wakeup|sched_wakeup_new|sched_migrate_task):(.*)$/;

/** Events of `perf script` lines (default fields); other lines are skipped. Times in seconds. */
export function parseSched(text: string): SchedEvent[] {
  const out: SchedEvent[] = [];
  for (const line of text.split("\n")) {
    const m = HEAD.exec(line);
    if (!m) continue;
    const [cpu, t, name, rest] = [Number(m[2]), Number(m[3]), m[4]!, m[5]!];
    const num = (k: string) => Number(new RegExp(`\\b${k}=(\\d+)`).exec(rest)?.[1] ?? NaN);
    if (name === "sched_switch") {
      const state = /prev_state=(\S+)/.exec(rest)?.[1] ?? "";
      out.push({ t, cpu, kind: "switch", prev: num("prev_pid"), prevRunnable: state.startsWith("R"), next: num("next_pid") });
    } else if (name === "sched_migrate_task") out.push({ t, cpu, kind: "migrate", pid: num("pid"), dest: num("dest_cpu") });
    else out.push({ t, cpu, kind: "wakeup", pid: num("pid"), target: num("target_cpu") });
  }
  return out;
}

/** A span of constant state: who runs on each CPU, and how many runnable threads wait on a busy CPU. */
type Span = { from: number; to: number; running: number[]; queuedOnBusy: number };

/** Consistent spans over `cpus` CPUs (thread 0 is the idle task). */
export function spans(events: SchedEvent[], cpus: number): Span[] {
  const running: number[] = new Array(cpus).fill(-1);
  const idleSince: number[] = new Array(cpus).fill(NaN);
  const lastWake = new Map<number, number>();
  const waiting = new Map<number, number>(); // thread → the CPU it is queued on
  const out: Span[] = [];
  let last = events[0]?.t ?? 0;
  const close = (t: number) => {
    if (t <= last) return;
    const idle = running.filter((p) => p === 0).length;
    let queued = 0;
    if (idle > 0) for (const cpu of waiting.values()) if (running[cpu] !== 0) queued++;
    out.push({ from: last, to: t, running: [...running], queuedOnBusy: Math.min(queued, idle) });
    last = t;
  };
  for (const e of events) {
    if (e.kind === "switch" && running[e.cpu] === 0 && e.prev !== 0) {
      // The idle → e.prev switch is missing: e.prev started at its wake-up, if that came after idling began.
      const woke = lastWake.get(e.prev);
      const at = woke !== undefined && woke >= idleSince[e.cpu]! ? woke : e.t;
      close(Math.max(at, last));
      running[e.cpu] = e.prev;
      waiting.delete(e.prev);
    }
    close(e.t);
    if (e.kind === "switch") {
      if (e.prev !== 0 && e.prevRunnable) waiting.set(e.prev, e.cpu);
      waiting.delete(e.next);
      running[e.cpu] = e.next;
      if (e.next === 0) idleSince[e.cpu] = e.t;
    } else if (e.kind === "wakeup") {
      lastWake.set(e.pid, e.t);
      if (!running.includes(e.pid)) waiting.set(e.pid, e.target);
    } else if (waiting.has(e.pid)) waiting.set(e.pid, e.dest);
  }
  return out;
}

export type WindowFigures = { ms: number; idleCpuMs: number; queuedMs: number; cpuMs: Map<string, number> };

/** Figures of each window ([from, to] in seconds), in time order; `role` names a thread (idle is "idle"). */
export function windows(all: Span[], wins: [number, number][], role: (tid: number) => string): WindowFigures[] {
  let i = 0;
  return [...wins]
    .sort((a, b) => a[0] - b[0])
    .map(([a, b]) => {
      while (i < all.length && all[i]!.to <= a) i++;
      const f: WindowFigures = { ms: (b - a) * 1000, idleCpuMs: 0, queuedMs: 0, cpuMs: new Map() };
      for (let k = i; k < all.length && all[k]!.from < b; k++) {
        const s = all[k]!;
        const d = (Math.min(b, s.to) - Math.max(a, s.from)) * 1000;
        if (d <= 0) continue;
        f.queuedMs += d * s.queuedOnBusy;
        for (const tid of s.running) {
          if (tid < 0) continue;
          const r = tid === 0 ? "idle" : role(tid);
          if (r === "idle") f.idleCpuMs += d;
          f.cpuMs.set(r, (f.cpuMs.get(r) ?? 0) + d);
        }
      }
      return f;
    });
}
