/**
 * What the benchmarks observe of the stack besides HTTP: its process tree, RSS and CPU per
 * process role (from /proc), and anomalies in its log.
 * Roles: the svc process (Miniflare's host and the in-process runner-host), its harness children
 * (`reference-harness/`, source or built), workerd (the Worker and its Durable Objects).
 */
import { readFileSync } from "node:fs";
import { commandOf, processTree } from "../test/helpers/process.ts";
import type { Stack } from "../test/helpers/stack.ts";

export { processTree };

/** RSS in MiB and the command line of one PID. */
export function memOf(pid: number): { pid: number; rssMiB: number; cmd: string } {
  try {
    const kb = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN);
    return { pid, rssMiB: kb / 1024, cmd: commandOf(pid) };
  } catch {
    return { pid, rssMiB: NaN, cmd: "" };
  }
}

/** The role of a process of the stack's tree (see above); "" for anything else in it. */
export function stackRole(stack: Stack, p: { pid: number; cmd: string }): "svc" | "harness" | "workerd" | "" {
  if (p.pid === stack.child.pid) return "svc";
  return p.cmd.includes("reference-harness/") ? "harness" : /workerd/.test(p.cmd) ? "workerd" : "";
}

/** The stack's tree split the way the figures need it: svc (Worker host + runner-host), harnesses, workerd. */
export function stackMemory(stack: Stack) {
  const procs = processTree(stack.child.pid!).map(memOf).filter((p) => Number.isFinite(p.rssMiB));
  const harness = procs.filter((p) => stackRole(stack, p) === "harness");
  const workerd = procs.filter((p) => stackRole(stack, p) === "workerd");
  const svc = procs.find((p) => p.pid === stack.child.pid)!;
  const sum = (xs: { rssMiB: number }[]) => xs.reduce((a, p) => a + p.rssMiB, 0);
  return { svcMiB: svc.rssMiB, harnessMiB: sum(harness), harnessCount: harness.length, harnessEach: harness.map((p) => p.rssMiB), workerdMiB: sum(workerd), allMiB: sum(procs) };
}

/** CPU seconds (user + sys) used so far by one PID (10 ms ticks). */
export function cpuOf(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return NaN;
  }
}

/** CPU seconds per PID of the stack's tree with its role; the provider and this client by name. */
function cpuSnapshot(stack: Stack, providerPid: number): Map<number | string, { role: string; cpu: number }> {
  const out = new Map<number | string, { role: string; cpu: number }>([["provider", { role: "provider", cpu: cpuOf(providerPid) }]]);
  for (const p of processTree(stack.child.pid!).map(memOf)) {
    const role = stackRole(stack, p);
    const cpu = cpuOf(p.pid);
    if (role && Number.isFinite(cpu)) out.set(p.pid, { role, cpu });
  }
  const u = process.cpuUsage();
  out.set("client", { role: "client", cpu: (u.user + u.system) / 1e6 });
  return out;
}

/**
 * CPU seconds per role between start and stop. Polled every 200 ms, so a process that starts
 * mid-phase counts from zero and one that exits counts up to its last poll (harness processes
 * come and go under load).
 */
export function trackCpu(stack: Stack, providerPid: number) {
  const first = cpuSnapshot(stack, providerPid);
  const last = new Map(first);
  const poll = () => {
    for (const [k, v] of cpuSnapshot(stack, providerPid)) last.set(k, v);
  };
  const timer = setInterval(poll, 200);
  return {
    stop(): Record<string, number> {
      clearInterval(timer);
      poll();
      const out: Record<string, number> = { svc: 0, harness: 0, workerd: 0, provider: 0, client: 0 };
      for (const [k, v] of last) out[v.role] = (out[v.role] ?? 0) + v.cpu - (first.get(k)?.cpu ?? 0);
      return out;
    },
  };
}

/**
 * Service-side anomalies seen in the stack's log since `from`: harness processes killed by the
 * runner-host's interrupt watchdog (no bench ever interrupts) and harness processes that ended
 * without being asked to. Printed by every bench so a figure is never read without them.
 */
export function anomalies(stack: Stack, from = 0) {
  const lines = stack.stderr().slice(from).split("\n");
  const at = (re: RegExp) => lines.filter((l) => re.test(l)).map((l) => Date.parse(/"time":"([^"]+)"/.exec(l)?.[1] ?? ""));
  const kills = at(/"msg":"harness did not end an interrupted turn; killing it"/);
  const lost = at(/"msg":"harness process ended"/);
  const detached = at(/"msg":"session detached"/);
  return { watchdogKills: kills.length, harnessLost: lost.length, lostAt: lost, detached: detached.length };
}

export const machine = () => `${(readFileSync("/proc/cpuinfo", "utf8").match(/^processor/gm) ?? []).length} cores, Node ${process.version}`;
