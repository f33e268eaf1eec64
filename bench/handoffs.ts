/**
 * Where a warm turn's first output waits, laid over the kernel's scheduling: serial warm turns on
 * the real local stack (one session, SSE open, a direct provider request before each, as the
 * latency bench interleaves them) under `perf sched record`, and each turn's window — client
 * `POST /events` → first `assistant.delta` frame — read against the trace:
 *
 *   - the CPU each process (main thread, and its helper threads apart) spent inside the window,
 *   - the idle CPU time inside it (CPUs × window when nothing runs),
 *   - "queued while a CPU idles": time a runnable thread sat on a busy CPU while another was idle.
 *
 * A window that is mostly idle CPU is bound by hand-offs between processes, not by CPU work.
 *
 *   npm run bench:handoffs [-- --turns 300 --warmup 60 | -- --short]
 *
 * Needs `perf` (Debian package linux-perf, installed here when missing) and the right to trace the
 * whole system (root, as CI runs). Both clocks are CLOCK_MONOTONIC: `perf record -k CLOCK_MONOTONIC`
 * and process.hrtime here. BENCH_KEEP_TRACE=1 keeps the trace file for a closer look.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import path from "node:path";
import { api, atCleanup, direct, harnessCommand, machine, memOf, ms, processTree, runBench, sleep, stackRole, startBenchStack, startProvider, stats } from "./lib.ts";
import { ensureDebianPackage } from "../test/helpers/debian.ts";
import { benchArgs } from "./args.ts";
import { parseSched, spans, windows } from "./sched-trace.ts";

const { turns: TURNS, warmup: WARMUP } = benchArgs({ turns: 300, warmup: 60 }, { turns: 20, warmup: 5 });
const TEXT = "[[deltas 20]]";

/** Thread ids of a process (its /proc task list). */
const threadsOf = (pid: number): number[] => {
  try {
    return readdirSync(`/proc/${pid}/task`).map(Number);
  } catch {
    return [];
  }
};

await runBench(5 * 60_000, async () => {
  ensureDebianPackage("linux-perf", () => !spawnSync("perf", ["--version"]).error);
  const provider = await startProvider();
  const stack = await startBenchStack(provider.url, { pi: { command: harnessCommand, spares: 0 } });
  const a = api(stack.url);
  const id = await a.create("pi");
  let cur: { first: bigint; done: (status: string) => void } | undefined;
  const h = a.stream(id, (event, data) => {
    if (!cur) return;
    if (event === "assistant.delta" && cur.first === 0n) cur.first = process.hrtime.bigint();
    if (event !== "session.status") return;
    const e = JSON.parse(data);
    if (e.input_id && e.data.status !== "running") cur.done(e.data.status);
  });
  await h.ready;
  /** One turn: its window in seconds, client clock; a turn that fails or shows no delta stops the bench. */
  const turn = async (): Promise<[number, number]> => {
    let timer: NodeJS.Timeout | undefined;
    const ended = new Promise<string>((resolve, reject) => {
      cur = { first: 0n, done: resolve };
      timer = setTimeout(() => reject(new Error("a turn did not end within 30 s")), 30_000);
    });
    const t0 = process.hrtime.bigint();
    await a.send(id, TEXT);
    const status = await ended.finally(() => clearTimeout(timer));
    if (status !== "idle" || cur!.first === 0n) throw new Error(`a turn ended ${status} ${cur!.first === 0n ? "without a delta" : ""}: ${stack.stderr().slice(-1000)}`);
    return [Number(t0) / 1e9, Number(cur!.first) / 1e9];
  };
  for (let i = 0; i < WARMUP; i++) await turn();

  // Roles by thread, read while everything runs: the main thread is the process, the rest its helpers.
  const role = new Map<number, string>();
  const name = (pid: number) => (pid === process.pid ? "client" : pid === provider.pid ? "provider" : stackRole(stack, memOf(pid)) || "other");
  for (const pid of [process.pid, provider.pid, ...processTree(stack.child.pid!)]) {
    const n = name(pid);
    for (const tid of threadsOf(pid)) role.set(tid, tid === pid ? n : `${n} threads`);
  }

  const dir = mkdtempSync(path.join(tmpdir(), "svc-handoffs-"));
  const data = path.join(dir, "sched.data");
  const keep = process.env.BENCH_KEEP_TRACE === "1";
  if (!keep) atCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const perf = spawn("perf", ["sched", "record", "-k", "CLOCK_MONOTONIC", "-a", "-o", data], { stdio: ["ignore", "ignore", "pipe"] });
  let perfErr = "";
  perf.stderr.on("data", (d) => (perfErr += d));
  const perfExit = new Promise<void>((r) => perf.on("exit", () => r()));
  atCleanup(() => void perf.kill("SIGKILL"));
  await sleep(500); // perf attaches its tracepoints before the first window
  const wins: [number, number][] = [];
  const directWins: [number, number][] = [];
  for (let i = 0; i < TURNS; i++) {
    const t0 = process.hrtime.bigint();
    let first = 0n;
    const r = await direct(provider.url, TEXT, () => (first ||= process.hrtime.bigint()));
    if (r.deltas !== 20) throw new Error(`direct: ${r.deltas} deltas`);
    directWins.push([Number(t0) / 1e9, Number(first) / 1e9]);
    wins.push(await turn());
  }
  await sleep(50);
  perf.kill("SIGINT");
  await perfExit; // stopped by SIGINT, which perf answers with a non-zero status
  if (!perfErr.includes("Captured and wrote")) throw new Error(`perf sched record failed: ${perfErr.slice(-500)}`);
  h.close();
  const text = execFileSync("perf", ["script", "-i", data], { maxBuffer: 1 << 30, stdio: ["ignore", "pipe", "ignore"] }).toString();
  const events = parseSched(text);
  if (events.length === 0) throw new Error("perf recorded no scheduling events");
  const timeline = spans(events, cpus().length);
  const figures = windows(timeline, wins, (tid) => role.get(tid) ?? "other");
  const directFigures = windows(timeline, directWins, (tid) => role.get(tid) ?? "other");

  /** p50, mean and p90 (nearest rank) of one figure over windows. */
  const col = (ws: typeof figures, f: (w: (typeof figures)[number]) => number) => {
    const v = ws.map(f).sort((x, y) => x - y);
    const s = { p50: stats(v).p50, mean: v.reduce((x, y) => x + y, 0) / v.length, p90: v[Math.ceil(0.9 * v.length) - 1]! };
    return `${ms(s.p50)} | ${ms(s.mean)} | ${ms(s.p90)}`;
  };
  const row = (label: string, f: (w: (typeof figures)[number]) => number) => `| ${label} | ${col(figures, f)} | ${col(directFigures, f)} |`;
  console.log(`\nfirst-output windows, ${figures.length} warm service turns and as many direct requests, ms (${machine()}; ${TEXT})\n`);
  console.log("| per window | service p50 | mean | p90 | direct p50 | mean | p90 |\n| --- | --- | --- | --- | --- | --- | --- |");
  console.log(row("window (service: POST → first delta; direct: request → first chunk)", (w) => w.ms));
  console.log(row("idle CPU time (CPU-ms)", (w) => w.idleCpuMs));
  console.log(row("runnable, queued on a busy CPU while another idles", (w) => w.queuedMs));
  const roles = [...new Set(figures.flatMap((w) => [...w.cpuMs.keys()]))].filter((r) => r !== "idle");
  const mean = (r: string) => figures.reduce((s, w) => s + (w.cpuMs.get(r) ?? 0), 0) / figures.length;
  roles.sort((x, y) => mean(y) - mean(x));
  console.log(`\nCPU per window, mean CPU-ms: ${roles.map((r) => `${r} ${ms(mean(r))}`).join(", ")}`);
  console.log("\nslowest windows (CPU-ms by process):");
  for (const w of [...figures].sort((x, y) => y.ms - x.ms).slice(0, 5)) {
    const top = [...w.cpuMs].filter(([r]) => r !== "idle").sort((x, y) => y[1] - x[1]).slice(0, 4);
    console.log(`  ${ms(w.ms)} ms: ${top.map(([r, v]) => `${r} ${ms(v)}`).join(", ")}, idle ${ms(w.idleCpuMs)}`);
  }
  if (keep) console.log(`\ntrace kept: ${data} (e.g. perf sched timehist -i ${data})`);
});
