/**
 * Memory of one reference harness process (RSS from /proc) with 0, 1 and 16 open sessions, each
 * session after one turn on the scripted provider (so the provider client is loaded), driven by
 * the runner-host's own HarnessProcess client. Also the time from spawn to `ready`.
 *
 *   npm run bench:harness-rss [-- --sessions 16 | -- --short]
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { HarnessProcess } from "../runner-host/harness/harness-process.ts";
import type { SessionEvent } from "../runner-host/harness/protocol.ts";
import { benchArgs } from "./args.ts";
import { harnessCommand, machine, runBench, sleep, startProvider } from "./lib.ts";

const { sessions: N } = benchArgs({ sessions: 16 }, { sessions: 2 });

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
/** Median of three readings 200 ms apart (RSS moves with GC). */
async function rss(pid: number): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < 3; i++) (xs.push(rssMiB(pid)), await sleep(200));
  return xs.sort((a, b) => a - b)[1]!;
}

await runBench(2 * 60_000, async () => {
  const provider = await startProvider();
  const hp = await HarnessProcess.start({ command: harnessCommand, rootDir: mkdtempSync(path.join(tmpdir(), "svc-rss-")), label: "pi", log: () => {} });
  try {
    const init = await hp.request({ op: "init", protocol: 1, providers: { openai: { key: "sk-bench", base_url: provider.url, api: "openai-completions" } } });
    if (!init.ok) throw new Error(init.error.message);
    await sleep(500);
    const rows: [string, number][] = [["0 sessions (ready, init answered)", await rss(hp.pid)]];
    for (let i = 0; i < N; i++) {
      const session = `s${i}`;
      const open = await hp.request({ op: "open", session, model: "openai/gpt-4o-mini", tools: [] });
      if (!open.ok) throw new Error(open.error.message);
      const ended = new Promise<void>((resolve) => {
        const off = hp.onEvent(session, (e: SessionEvent) => void (e.type === "turn.end" && (off(), resolve())));
      });
      await hp.request({ op: "run", session, turn: `t${i}`, text: "[[deltas 50]]" });
      await ended;
      if (i === 0) rows.push(["1 session (after one turn)", await rss(hp.pid)]);
    }
    rows.push([`${N} sessions (after one turn each)`, await rss(hp.pid)]);
    console.log(`\nreference harness process RSS (${machine()}); spawn → ready ${hp.startupMs.toFixed(0)} ms\n`);
    console.log("| sessions open | RSS, MiB | per session over the 1-session figure, MiB |");
    console.log("| --- | --- | --- |");
    for (const [label, v] of rows) console.log(`| ${label} | ${v.toFixed(1)} | ${label.startsWith(String(N)) ? ((v - rows[1]![1]) / (N - 1)).toFixed(2) : "—"} |`);
  } finally {
    hp.endInput();
    await Promise.race([hp.exited, sleep(3000)]);
    await hp.kill();
  }
});
