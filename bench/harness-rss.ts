/**
 * Memory of one reference harness process (RSS from /proc) with 0, 1 and 16 open sessions, each
 * session after one turn on the scripted provider (so the provider client is loaded), driven by
 * the runner-host's own HarnessProcess client. Also the time from spawn to `ready`, the process at
 * 16 sessions ÷ 16 (what each session of a full process costs at `max_shared` 16), and how much of
 * that RSS is the process's own and how much pages it shares with every other Node process.
 * Then CPU per turn: 30 rounds of one turn in each of the 16 sessions at once, CPU of the
 * harness process from /proc (10 ms ticks; 480 turns make that ±0.02 ms per turn).
 *
 * Each size is read right after a turn and, where the harness would trim (runner-host/
 * reference-harness/idle-gc.ts), once it has been quiet long enough to: ready after its warm-up
 * plus `TRIM_QUIET_MS`, then 16 idle sessions and the process after the CPU rounds each after
 * `TRIM_IDLE_MS` (the rounds' work may or may not pay for a quick trim; the long quiet always
 * trims a grown process). With `--short` the long waits are skipped.
 *
 *   npm run bench:harness-rss [-- --sessions 16 --rounds 30 | -- --short]
 *   BENCH_HARNESS_COMMAND='["node","runner-host/reference-harness/main.ts"]' npm run bench:harness-rss   (a variant)
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { HarnessProcess } from "../runner-host/harness/harness-process.ts";
import { TRIM_IDLE_MS, TRIM_QUIET_MS } from "../runner-host/reference-harness/idle-gc.ts";
import type { SessionEvent } from "../runner-host/harness/protocol.ts";
import { benchArgs } from "./args.ts";
import { cpuOf, harnessCommand, machine, runBench, sleep, startProvider } from "./lib.ts";

const { sessions: N, rounds: ROUNDS, short } = benchArgs({ sessions: 16, rounds: 30 }, { sessions: 2, rounds: 2 });
/** Margin past a trim's quiet time before reading, ms: the trim itself takes up to ~150 ms. */
const SETTLE_MS = 1_000;

/**
 * RSS split by who pays for it (/proc/<pid>/smaps_rollup): private pages (the process's own heap and
 * native memory, paid by every process) and shared ones (mostly the Node binary's and libraries'
 * file pages, paid once per machine however many harness processes map them).
 */
function rssSplit(pid: number): { privateMiB: number; sharedMiB: number } {
  const kb = (k: string, text: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? 0);
  const t = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  return {
    privateMiB: (kb("Private_Clean", t) + kb("Private_Dirty", t)) / 1024,
    sharedMiB: (kb("Shared_Clean", t) + kb("Shared_Dirty", t)) / 1024,
  };
}

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
/** Median of three readings 200 ms apart (RSS moves with GC). */
async function rss(pid: number, quietMs = 0): Promise<number> {
  if (quietMs > 0) await sleep(quietMs + SETTLE_MS);
  const xs: number[] = [];
  for (let i = 0; i < 3; i++) (xs.push(rssMiB(pid)), await sleep(200));
  return xs.sort((a, b) => a - b)[1]!;
}

await runBench(4 * 60_000, async () => {
  const provider = await startProvider();
  const hp = await HarnessProcess.start({ command: harnessCommand, rootDir: mkdtempSync(path.join(tmpdir(), "svc-rss-")), label: "pi", log: () => {} });
  /** One `[[deltas 50]]` turn (the concurrency bench's turn) in `session`, to its `turn.end`. */
  async function turn(session: string, id: string): Promise<void> {
    const ended = new Promise<void>((resolve) => {
      const off = hp.onEvent(session, (e: SessionEvent) => void (e.type === "turn.end" && e.turn === id && (off(), resolve())));
    });
    const run = await hp.request({ op: "run", session, turn: id, text: "[[deltas 50]]" });
    if (!run.ok) throw new Error(run.error.message);
    await ended;
  }
  try {
    const init = await hp.request({ op: "init", protocol: 1, providers: { openai: { key: "sk-bench", base_url: provider.url, api: "openai-completions" } } });
    if (!init.ok) throw new Error(init.error.message);
    // Ready: init answered, its warm-up turn ended, and the trim that follows it done.
    const rows: [string, number, number | undefined][] = [["0 sessions (ready, init answered)", await rss(hp.pid, TRIM_QUIET_MS), undefined]];
    for (let i = 0; i < N; i++) {
      const session = `s${i}`;
      const open = await hp.request({ op: "open", session, model: "openai/gpt-4o-mini", tools: [] });
      if (!open.ok) throw new Error(open.error.message);
      await turn(session, `t${i}`);
      if (i === 0) rows.push(["1 session (after one turn)", await rss(hp.pid), undefined]);
    }
    const fullNow = await rss(hp.pid);
    const split = rssSplit(hp.pid);
    rows.push([`${N} sessions (after one turn each)`, fullNow, short ? undefined : await rss(hp.pid, TRIM_IDLE_MS)]);
    console.log(`\nreference harness process RSS (${machine()}); spawn → ready ${hp.startupMs.toFixed(0)} ms\n`);
    console.log(`| sessions open | RSS right after, MiB | RSS idle ${TRIM_IDLE_MS / 1000} s, MiB | per session over the 1-session figure, MiB (idle) |`);
    console.log("| --- | --- | --- | --- |");
    for (const [label, now, idle] of rows) {
      const per = label.startsWith(String(N)) ? ((now - rows[1]![1]) / (N - 1)).toFixed(2) + (idle === undefined ? "" : ` (${((idle - rows[1]![1]) / (N - 1)).toFixed(2)})`) : "—";
      console.log(`| ${label} | ${now.toFixed(1)} | ${idle?.toFixed(1) ?? "—"} | ${per} |`);
    }
    // The capacity figure: one process holds up to max_shared sessions, so its whole size is spread over them.
    const [, full, fullIdle] = rows.at(-1)!;
    console.log(`\nthe process at ${N} sessions ÷ ${N}: ${(full / N).toFixed(2)} MiB per session right after its turn${fullIdle === undefined ? "" : `, ${(fullIdle / N).toFixed(2)} idle`}`);
    console.log(
      `of its RSS then, private ${split.privateMiB.toFixed(1)} MiB (${(split.privateMiB / N).toFixed(2)} per session: paid by every process) and shared ${split.sharedMiB.toFixed(1)} MiB (the Node binary's and libraries' file pages: paid once per machine)`,
    );

    // CPU: rounds of one turn in every session at once, as a full process sees them under load.
    const cpu0 = cpuOf(hp.pid);
    for (let r = 0; r < ROUNDS; r++) await Promise.all(Array.from({ length: N }, (_, i) => turn(`s${i}`, `r${r}-${i}`)));
    const turns = ROUNDS * N;
    const cpuMs = ((cpuOf(hp.pid) - cpu0) * 1000) / turns;
    const busy = await rss(hp.pid);
    const cpu1 = cpuOf(hp.pid);
    const wait = short ? TRIM_QUIET_MS : TRIM_IDLE_MS;
    const quiet = await rss(hp.pid, wait);
    const trimMs = (cpuOf(hp.pid) - cpu1) * 1000; // the idle collections, the trim among them
    console.log(`harness CPU per turn over ${turns} turns (${N} at a time): ${cpuMs.toFixed(2)} ms; RSS right after: ${busy.toFixed(1)} MiB, ${(wait + SETTLE_MS) / 1000} s on: ${quiet.toFixed(1)} MiB (CPU meanwhile ${trimMs.toFixed(0)} ms)`);
  } finally {
    hp.endInput();
    await Promise.race([hp.exited, sleep(3000)]);
    await hp.kill();
  }
});
