/**
 * CPU profiles of the stack under a bench, to name where the time goes before cutting anything.
 *
 *   BENCH_PROFILE=<dir> npm run bench:concurrency
 *
 * - svc process (Miniflare host + in-process runner-host): started with `--cpu-prof`, so Node
 *   writes `<dir>/CPU.*.cpuprofile` when the stack exits.
 * - workerd (the Worker and its objects): Miniflare's inspector (`SVC_INSPECT_WORKER`), driven
 *   over the DevTools protocol: `Profiler.start` before the load phase, `Profiler.stop` after it.
 * - harness processes: `harnessProfileFlag` preloads bench/harness-profile.ts, which writes
 *   `<dir>/harness-<pid>-<n>.cpuprofile` every 2 s while the process runs.
 * `summarize` prints the top functions by self time, and self time per source file, from any of them.
 */
import { chmodSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";
import WebSocket from "ws";

type Node = { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] };
export type Profile = { nodes: Node[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number };

/** Environment additions for the stack: the inspector port and Node's own profiler. */
export function profileEnv(dir: string, inspectorPort: number): Record<string, string> {
  return { SVC_INSPECT_WORKER: String(inspectorPort), NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${dir}` };
}

/** Starts sampling every inspectable workerd target; `stop` returns one profile per target. */
export async function startWorkerdProfile(inspectorPort: number): Promise<{ stop(): Promise<Profile[]> }> {
  const targets = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()) as { webSocketDebuggerUrl: string }[];
  // Left out: a target whose id holds a `#` (the local stack's `core:custom-fetch:0:#LOCAL_DISK`, a
  // shim that hands requests to the svc process, none of our code). A WebSocket URL cannot carry the
  // `#`, and the inspector answers 404 to it escaped.
  const sessions = await Promise.all(targets.filter((t) => !t.webSocketDebuggerUrl.includes("#")).map((t) => cdp(t.webSocketDebuggerUrl)));
  for (const s of sessions) {
    await s.call("Profiler.enable");
    await s.call("Profiler.setSamplingInterval", { interval: 200 }); // µs: fine enough for ~1 ms handlers
    await s.call("Profiler.start");
  }
  return {
    async stop() {
      const out: Profile[] = [];
      for (const s of sessions) {
        out.push(((await s.call("Profiler.stop")) as { profile: Profile }).profile);
        s.close();
      }
      return out;
    },
  };
}

async function cdp(url: string) {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => (ws.once("open", resolve), ws.once("error", reject)));
  let next = 1;
  const waiting = new Map<number, (r: unknown) => void>();
  ws.on("message", (m) => {
    const msg = JSON.parse(String(m)) as { id?: number; result?: unknown };
    if (msg.id !== undefined) waiting.get(msg.id)?.(msg.result), waiting.delete(msg.id);
  });
  return {
    call(method: string, params: object = {}): Promise<unknown> {
      const id = next++;
      ws.send(JSON.stringify({ id, method, params }));
      return new Promise((r) => waiting.set(id, r));
    },
    close: () => ws.close(),
  };
}

/**
 * The Node flag that profiles a harness process into `dir` (put before its script). The directory
 * is made writable by all: harness processes may run as harness users of their own.
 */
export function harnessProfileFlag(dir: string): string {
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o777);
  const url = pathToFileURL(path.join(import.meta.dirname, "harness-profile.ts"));
  url.searchParams.set("dir", path.resolve(dir));
  return `--import=${url.href}`;
}

/** The pieces harness processes wrote into `dir` (each is a profile of its own stretch). */
export function readHarnessProfiles(dir: string): Profile[] {
  return readdirSync(dir)
    .filter((f) => f.startsWith("harness-") && f.endsWith(".cpuprofile"))
    .map((f) => JSON.parse(readFileSync(path.join(dir, f), "utf8")) as Profile);
}

/** The newest `.cpuprofile` Node wrote into `dir` (the svc process's, once it exited). */
export function readNodeProfiles(dir: string): Profile[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".cpuprofile") && f.startsWith("CPU."))
    .map((f) => JSON.parse(readFileSync(path.join(dir, f), "utf8")) as Profile);
}

export function saveProfile(file: string, p: Profile): void {
  mkdirSync(path.dirname(file), { recursive: true }); // Node's own profiles make the directory only at exit
  writeFileSync(file, JSON.stringify(p));
}

/**
 * The most time one sample stands for, µs. A sample's weight is the time since the one before it;
 * a process that idles without reporting it (Node does not mark its event loop's waits as idle)
 * leaves a gap, which would all be charged to the first sample after it (seconds, for a harness
 * that was idle). Both profilers here sample every 200–500 µs.
 */
const MAX_SAMPLE_US = 5_000;

/** Top functions by self time, and self time per file, as text lines. */
export function summarize(label: string, profiles: Profile[], top = 25): string {
  const selfUs = new Map<string, number>();
  const fileUs = new Map<string, number>();
  let total = 0;
  for (const p of profiles) {
    const byId = new Map(p.nodes.map((n) => [n.id, n]));
    for (let i = 0; i < p.samples.length; i++) {
      const n = byId.get(p.samples[i]!)!;
      const dt = Math.min(p.timeDeltas[i] ?? 0, MAX_SAMPLE_US);
      const f = n.callFrame;
      if (f.functionName === "(idle)" || f.functionName === "(program)") continue;
      total += dt;
      const file = f.url ? f.url.replace(/^.*\/(node_modules\/)/, "$1").replace(/^file:\/\/.*?\/(src|runner-host|worker\.mjs)/, "$1") : f.functionName;
      const key = `${f.functionName || "(anonymous)"} ${file}:${f.lineNumber + 1}`;
      selfUs.set(key, (selfUs.get(key) ?? 0) + dt);
      fileUs.set(file, (fileUs.get(file) ?? 0) + dt);
    }
  }
  const pct = (us: number) => `${((100 * us) / total).toFixed(1)}%`;
  const rows = (m: Map<string, number>, k: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, k).map(([name, us]) => `  ${pct(us).padStart(6)}  ${(us / 1000).toFixed(0).padStart(6)} ms  ${name}`);
  return [`${label}: ${(total / 1000).toFixed(0)} ms of non-idle samples`, "top functions (self):", ...rows(selfUs, top), "by file (self):", ...rows(fileUs, 15)].join("\n");
}
