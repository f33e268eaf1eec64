/**
 * SSE stream opens per second under `limits.subscribers` counted across the deployment, in two
 * settings of the same code, one run each in turn:
 *   far   — the cap far above the load: isolates hold slots in blocks (headroom up to 16), so most
 *           opens cost no gate call;
 *   edge  — the cap one above the load: headroom shrinks to 0, so (nearly) every open asks the
 *           StreamGate — what a single counter object asked on every open would cost.
 * Each round opens STREAMS streams on as many sessions (created beforehand, not timed), CONCURRENCY
 * at a time, and keeps them open; the time to the last response head is measured.
 *
 *   npm run bench:stream-opens [-- --streams 120 --concurrency 8 --rounds 3 | -- --short]
 */
import http from "node:http";
import { api, machine, ms, runBench, startBenchStack, startProvider, auth, harnessCommand } from "./lib.ts";
import { benchArgs } from "./args.ts";

const sizes = benchArgs({ streams: 120, concurrency: 8, rounds: 3 }, { streams: 8, concurrency: 4, rounds: 1 });
const STREAMS = sizes.streams;
const CONCURRENCY = sizes.concurrency;
const ROUNDS = sizes.rounds;

/** Opens one SSE stream and resolves with its status once the response head arrives; the socket stays open. */
function openStream(url: string, open: http.ClientRequest[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { ...auth, accept: "text/event-stream" }, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    open.push(req);
  });
}

async function round(provider: { url: string }, cap: number): Promise<{ perSec: number; p50: number; refused: number }> {
  const stack = await startBenchStack(provider.url, { pi: { command: harnessCommand } }, { subscribers: cap });
  const a = api(stack.url);
  const ids: string[] = [];
  for (let i = 0; i < STREAMS; i++) ids.push(await a.create("pi"));
  const open: http.ClientRequest[] = [];
  const each: number[] = [];
  let refused = 0;
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ids.length) {
        const id = ids[next++]!;
        const t = performance.now();
        const status = await openStream(`${stack.url}/sessions/${id}/events`, open);
        each.push(performance.now() - t);
        if (status !== 200) refused += 1;
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  for (const r of open) r.destroy();
  await stack.stop();
  each.sort((x, y) => x - y);
  return { perSec: STREAMS / secs, p50: each[Math.floor(each.length / 2)]!, refused };
}

await runBench(10 * 60_000, async () => {
  console.log(`stream opens: ${STREAMS} streams, ${CONCURRENCY} at a time, ${ROUNDS} rounds each; ${machine()}`);
  const rows: Record<string, { perSec: number; p50: number; refused: number }[]> = { far: [], edge: [] };
  const provider = await startProvider();
  for (let i = 0; i < ROUNDS; i++) {
    rows.far!.push(await round(provider, 1_000_000));
    rows.edge!.push(await round(provider, STREAMS + 1));
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log("| setting | opens/s (median of rounds) | open → head p50, ms | refused |");
  console.log("| --- | --- | --- | --- |");
  for (const [k, rs] of Object.entries(rows)) {
    console.log(`| ${k} | ${med(rs.map((r) => r.perSec)).toFixed(0)} | ${ms(med(rs.map((r) => r.p50)))} | ${rs.reduce((n, r) => n + r.refused, 0)} |`);
  }
  console.log(`edge ÷ far opens/s: ${(med(rows.edge!.map((r) => r.perSec)) / med(rows.far!.map((r) => r.perSec))).toFixed(2)}`);
});
