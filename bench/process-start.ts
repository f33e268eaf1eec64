/**
 * What starting a harness process costs the runner-host's event loop: the longest pause of a 1 ms
 * ticker (standing for the sessions the runner-host serves) from the start until the process's
 * `ready` line, in a process grown to the local stack's svc size (~250 MiB RSS). Side by side in
 * one run, alternating: Node's `spawn` called here (the fork copies this process's page tables
 * while its loop waits) and the process starter (runner-host/harness/spawner.ts: the fork happens in
 * a small process of its own and the pipes come back over IPC). Both start the same command — the
 * reference harness through the start wrapper — and the same ticker runs with nothing starting, as
 * the floor.
 *
 *   npm run bench:process-start [-- --starts 12 | -- --short]
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import type { Readable } from "node:stream";
import { wrappedCommand } from "../runner-host/harness/clean-spawn.ts";
import { resolveCommand } from "../runner-host/harness/harness-process.ts";
import { Spawner } from "../runner-host/harness/spawner.ts";
import { benchArgs } from "./args.ts";
import { harnessCommand, machine, runBench, stats } from "./lib.ts";

const { starts: STARTS } = benchArgs({ starts: 12 }, { starts: 1 });
/** Heap held while measuring, MiB: the local stack's svc process is ~210–250 MiB. */
const BALLAST_MIB = 200;
/** How long the floor's ticker runs per sample, ms: about one start. */
const IDLE_MS = 350;

type Started = { stdout: Readable; end(): Promise<void> };

const [file, args] = wrappedCommand(resolveCommand(harnessCommand, process.cwd()), process.env.PATH);
const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/tmp", LANG: "C.UTF-8" };
const starter = new Spawner();

async function direct(): Promise<Started> {
  // Descriptor 3 is the wrapper's gate: closed at once, as the starter closes it once it handed the pipes over.
  const child = spawn(file, args, { env, detached: true, stdio: ["pipe", "pipe", "ignore", "pipe"] });
  child.stdio[3]!.destroy();
  return { stdout: child.stdout!, end: async () => void (child.stdin!.end(), await once(child, "exit")) };
}

async function throughStarter(): Promise<Started> {
  const child = await starter.spawn({ file, args, env });
  child.stderr.resume();
  return { stdout: child.stdout, end: async () => void (child.stdin.end(), await once(child, "close")) };
}

/** The ticker's longest pause while `work` runs, ms. */
async function worstPause(work: () => Promise<void>): Promise<number> {
  let last = performance.now();
  let worst = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 1);
  await work();
  clearInterval(tick);
  return Math.max(worst, performance.now() - last);
}

async function startToReady(how: () => Promise<Started>): Promise<{ pause: number; ready: number }> {
  let started!: Started;
  const t0 = performance.now();
  const pause = await worstPause(async () => {
    started = await how();
    started.stdout.setEncoding("utf8");
    let text = "";
    for await (const chunk of started.stdout) if ((text += chunk).includes("\n")) break;
    if (!text.includes('"ready"')) throw new Error(`no ready line: ${text.slice(0, 200)}`);
  });
  const ready = performance.now() - t0;
  await started.end();
  return { pause, ready };
}

await runBench(5 * 60_000, async () => {
  const ballast: Buffer[] = [];
  for (let i = 0; i < BALLAST_MIB; i++) ballast.push(Buffer.alloc(1 << 20, i));
  await startToReady(throughStarter); // the starter's own start (once per runner-host) is not a sample
  const rows = { idle: [] as number[], direct: [] as number[], starter: [] as number[], readyDirect: [] as number[], readyStarter: [] as number[] };
  for (let i = 0; i < STARTS; i++) {
    rows.idle.push(await worstPause(() => new Promise((r) => setTimeout(r, IDLE_MS))));
    const d = await startToReady(direct);
    const s = await startToReady(throughStarter);
    rows.direct.push(d.pause);
    rows.starter.push(s.pause);
    rows.readyDirect.push(d.ready);
    rows.readyStarter.push(s.ready);
  }
  const f = (x: number) => x.toFixed(1);
  const idle = stats(rows.idle);
  console.log(`\nthe runner-host's event loop while a harness process starts (${machine()}; this process ${process.memoryUsage().rss >> 20} MiB RSS; ${STARTS} starts each, alternating)\n`);
  console.log("| how | longest pause p50 | longest pause max | ratio p50 | spawn → ready p50 |");
  console.log("| --- | ---: | ---: | ---: | ---: |");
  console.log(`| nothing starting (${IDLE_MS} ms) | ${f(idle.p50)} | ${f(idle.max)} | — | — |`);
  const d = stats(rows.direct);
  const s = stats(rows.starter);
  console.log(`| spawn() in this process | ${f(d.p50)} | ${f(d.max)} | 1.0× | ${f(stats(rows.readyDirect).p50)} |`);
  console.log(`| the process starter | ${f(s.p50)} | ${f(s.max)} | ${(s.p50 / d.p50).toFixed(2)}× | ${f(stats(rows.readyStarter).p50)} |`);
  ballast.length = 0;
});
