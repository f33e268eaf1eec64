/**
 * This service beside its peers, in one run, with one client and one scripted provider:
 *
 *   direct     the provider read straight by the client: the physical limit
 *   service    this service on the real local stack (`svc -config`, reference harness)
 *   LangGraph  the LangGraph JS in-memory dev server, one-node graph, streaming ChatOpenAI
 *              (peers/langgraph.ts)
 *   agents     Cloudflare's `AIChatAgent` Durable Object in Miniflare, AI SDK `streamText` through
 *              an OpenAI-compatible provider (peers/agents.ts)
 *
 * Every path's model is the same scripted provider process; every path is read by this process
 * (lib.ts's HTTP/SSE client; the agents path over its WebSocket chat protocol, the only way its
 * client talks to it). Each path's turn is measured from just before its request to:
 *   first output  its first non-empty text (direct: content delta; service: assistant.delta frame;
 *                 LangGraph: `messages` event; agents: `text-delta` chunk)
 *   end           its own end signal (direct: response closed after [DONE]; service: the turn's idle
 *                 frame on a stream opened beforehand; LangGraph: response closed — after the dev
 *                 server's ~500 ms close tail; agents: the reply's `done` frame)
 * Every turn's joined text is checked against the provider's script, so a path that streamed
 * nothing (or something else) fails the bench instead of looking fast.
 *
 * Phases (each path's sessions / threads / agents created beforehand, creation not timed):
 *   1. first output, warm: `[[deltas 20]]` on one session per path that already had turns;
 *      samples interleaved with the order rotating, so a noisy second hits every path alike
 *   2. one long turn: `[[deltas N size=4]]` (N = 20,000), --reps rounds, order rotating; a
 *      session per path that had one short turn
 *   3. concurrency: --sessions closed loops of `[[deltas 50]]` turns per path (a session each,
 *      one turn each first), completed turns/s over --window seconds, taken as two halves in
 *      A-B-C-D-D-C-B-A order, each half after its own --warmup; and the server's CPU per turn
 *
 *   npm run bench [-- --warm 40 --n 20000 --reps 3 --sessions 50 --window 20 --warmup 5 | -- --short]
 */
import { readFileSync } from "node:fs";
import { anomalies, closedLoop, cpuOf, direct, harnessCommand, machine, memOf, ms, now, processTree, runBench, scriptedText, startBenchStack, startProvider, stats, type Turn } from "./lib.ts";
import { benchArgs } from "./args.ts";
import { openSession } from "./service-turns.ts";
import { startLangGraph, LANGGRAPH_WORKERS } from "./peers/langgraph.ts";
import { startAgents } from "./peers/agents.ts";

const sizes = benchArgs({ warm: 40, n: 20_000, reps: 3, sessions: 50, window: 20, warmup: 5 }, { warm: 3, n: 2_000, reps: 1, sessions: 4, window: 1, warmup: 0.5 });
const SHORT_TURN = 20;
const LOAD_TURN = 50;
const directive = (n: number) => `[[deltas ${n} size=4]]`;
/** Unmeasured turns per path before the first-output samples (JIT, connections, processes up). */
const WARMUP_TURNS = sizes.short ? 2 : 5;
/** Service settings of the load phase (as bench/concurrency.ts): 64 session slots for ≤ 52 sessions. */
const HARNESS = { command: harnessCommand, max_shared: 16, max_hosts: 4 };
const LIMITS = { active: 64 };

const PATHS = ["direct", "service", "langgraph", "agents"] as const;
type PathName = (typeof PATHS)[number];
type TurnFn = (text: string) => Promise<Turn>;

/** A turn whose text is not the provider's script for `n` deltas is a failed measurement. */
async function checked(name: PathName, turn: TurnFn, n: number): Promise<Turn> {
  const r = await turn(directive(n));
  const want = scriptedText(n);
  if (r.text !== want) throw new Error(`${name}: text differs from the provider's script (${r.text.length} of ${want.length} chars)`);
  if (!Number.isFinite(r.firstMs) || !Number.isFinite(r.endMs)) throw new Error(`${name}: no first output or no end`);
  return r;
}

const version = (pkg: string) => (JSON.parse(readFileSync(new URL(`../node_modules/${pkg}/package.json`, import.meta.url), "utf8")) as { version: string }).version;

await runBench((sizes.short ? 2 : 12) * 60_000, async () => {
  const provider = await startProvider();
  // Start-up is not measured: the three servers start side by side. All of them settle before a
  // failure is thrown, so each one that did start is registered for the cleanup.
  const [s, l, g] = await Promise.allSettled([startBenchStack(provider.url, { pi: HARNESS }, LIMITS), startLangGraph(provider.url), startAgents(provider.url)]);
  if (s.status === "rejected" || l.status === "rejected" || g.status === "rejected") throw [s, l, g].find((r) => r.status === "rejected")!.reason;
  const [stack, lg, ag] = [s.value, l.value, g.value];

  const per = <T>(f: (p: PathName) => T) => Object.fromEntries(PATHS.map((p) => [p, f(p)])) as Record<PathName, T>;
  let names = 0;
  const closers: (() => unknown)[] = [];
  /** A fresh session of each path: its turn function. */
  const open: Record<PathName, () => Promise<TurnFn>> = {
    direct: async () => async (text) => {
      let first = NaN;
      let last = NaN;
      const t0 = now();
      const r = await direct(provider.url, text, (t) => ((first = Number.isNaN(first) ? t : first), (last = t)));
      return { firstMs: first - t0, lastMs: last - t0, endMs: r.tEnd - t0, text: r.text };
    },
    service: async () => {
      const s = await openSession(stack.url, "pi");
      closers.push(s.close);
      return s.turn;
    },
    langgraph: async () => {
      const thread = await lg.thread();
      return (text) => lg.turn(thread, text);
    },
    agents: async () => {
      const chat = await ag.chat(`bench-${++names}`);
      closers.push(chat.close);
      return chat.turn;
    },
  };
  const openAll = async () => Object.fromEntries(await Promise.all(PATHS.map(async (p) => [p, await open[p]()] as const))) as Record<PathName, TurnFn>;

  // 1. First output, warm.
  const warm = await openAll();
  for (const p of PATHS) for (let i = 0; i < WARMUP_TURNS; i++) await checked(p, warm[p], SHORT_TURN);
  const first = Object.fromEntries(PATHS.map((p) => [p, [] as number[]])) as Record<PathName, number[]>;
  for (let i = 0; i < sizes.warm; i++) {
    for (let k = 0; k < PATHS.length; k++) {
      const p = PATHS[(i + k) % PATHS.length]!;
      first[p].push((await checked(p, warm[p], SHORT_TURN)).firstMs);
    }
  }

  // 2. One long turn.
  const long = await openAll();
  for (const p of PATHS) await checked(p, long[p], SHORT_TURN);
  const longRuns = Object.fromEntries(PATHS.map((p) => [p, [] as Turn[]])) as Record<PathName, Turn[]>;
  // CPU seconds of each path's server processes (the provider excluded: the same for every path)
  // over its long turns: where a path's time goes when it is not waiting.
  const servers: Record<PathName, number | undefined> = { direct: undefined, service: stack.child.pid!, langgraph: lg.pid, agents: ag.pid };
  /** CPU seconds so far of a path's server tree, split into workerd and the Node processes. */
  const treeCpu = (p: PathName) => {
    const out = { workerd: 0, node: 0 };
    for (const pid of servers[p] === undefined ? [] : processTree(servers[p]!)) out[/workerd/.test(memOf(pid).cmd) ? "workerd" : "node"] += cpuOf(pid) || 0;
    return out;
  };
  const longCpu = Object.fromEntries(PATHS.map((p) => [p, { workerd: 0, node: 0 }])) as Record<PathName, { workerd: number; node: number }>;
  for (let i = 0; i < sizes.reps; i++) {
    for (let k = 0; k < PATHS.length; k++) {
      const p = PATHS[(i + k) % PATHS.length]!;
      const c0 = treeCpu(p);
      longRuns[p].push(await checked(p, long[p], sizes.n));
      const c1 = treeCpu(p);
      longCpu[p].workerd += c1.workerd - c0.workerd;
      longCpu[p].node += c1.node - c0.node;
    }
  }
  for (const c of closers.splice(0)) c();

  // 3. Concurrent sessions. Every path's sessions are opened (one turn each) up front; then the
  // paths take the load in A-B-C-D-D-C-B-A order, two windows of half the length each, so drift on
  // a shared box hits every path alike. turns/s = turns ending inside both windows ÷ their length.
  const loadTurns = {} as Record<PathName, TurnFn[]>;
  for (const p of PATHS) {
    loadTurns[p] = await Promise.all(Array.from({ length: sizes.sessions }, () => open[p]()));
    await Promise.all(loadTurns[p].map((t) => checked(p, t, LOAD_TURN)));
  }
  const mark = stack.mark();
  const halfMs = (sizes.window * 1000) / 2;
  const load = per(() => ({ turns: 0, lat: [] as number[], errors: [] as string[], cpu: 0 }));
  for (const p of [...PATHS, ...[...PATHS].reverse()]) {
    // The server tree's CPU over the window itself (not the warm-up): read when it opens and closes.
    let c0 = 0;
    let c1 = 0;
    const total = () => ((c) => c.workerd + c.node)(treeCpu(p));
    const window = { open: () => (c0 = total()), close: () => (c1 = total()) };
    const r = await closedLoop(sizes.sessions, sizes.warmup * 1000, halfMs, (w) => checked(p, loadTurns[p][w]!, LOAD_TURN), window);
    load[p].turns += r.samples.length;
    load[p].lat.push(...r.samples);
    load[p].errors.push(...r.errors);
    load[p].cpu += c1 - c0;
  }
  for (const c of closers.splice(0)) c();
  const odd = anomalies(stack, mark);

  // The table: each peer beside direct, and the service beside each peer.
  const firstStats = Object.fromEntries(PATHS.map((p) => [p, stats(first[p])])) as Record<PathName, ReturnType<typeof stats>>;
  const med = (p: PathName, f: (t: Turn) => number) => stats(longRuns[p].map(f)).p50;
  /** A ratio to two significant digits (0.0031, 0.45, 2.3, 41). */
  const x = (v: number) => (v >= 10 ? v.toFixed(0) : v.toPrecision(2));
  /** A time row: lower is better. */
  const timeRow = (label: string, v: Record<PathName, number>) => {
    const cell = (p: PathName) => (p === "direct" ? ms(v[p]) : `${ms(v[p])} (${x(v[p] / v.direct)}× direct)`);
    const vs = (peer: PathName) => (v[peer] >= v.service ? `${x(v[peer] / v.service)}× faster` : `${x(v.service / v[peer])}× slower`);
    return `| ${label} | ${PATHS.map(cell).join(" | ")} | ${vs("langgraph")} | ${vs("agents")} |`;
  };
  /** A rate row: higher is better. */
  const rateRow = (label: string, v: Record<PathName, number>) => {
    const cell = (p: PathName) => (p === "direct" ? v[p].toFixed(1) : `${v[p].toFixed(1)} (${x(v[p] / v.direct)}× direct)`);
    const vs = (peer: PathName) => (v.service >= v[peer] ? `${x(v.service / v[peer])}× more` : `${x(v[peer] / v.service)}× fewer`);
    return `| ${label} | ${PATHS.map(cell).join(" | ")} | ${vs("langgraph")} | ${vs("agents")} |`;
  };

  console.log(`\nthis service beside its peers, one run (${machine()}; scripted provider in its own process; one client)`);
  console.log(`peers: LangGraph JS dev server (@langchain/langgraph-api ${version("@langchain/langgraph-api")}, @langchain/langgraph ${version("@langchain/langgraph")}, ${LANGGRAPH_WORKERS} run workers); agents ${version("agents")} + @cloudflare/ai-chat ${version("@cloudflare/ai-chat")} AIChatAgent, ai ${version("ai")}, in Miniflare ${version("miniflare")}\n`);
  console.log("| measure | direct | this service | LangGraph | agents (AIChatAgent) | service vs LangGraph | service vs agents |");
  console.log("| --- | --- | --- | --- | --- | --- | --- |");
  console.log(timeRow(`first output p50, ms (warm, [[deltas ${SHORT_TURN}]], ${sizes.warm} each)`, per((p) => firstStats[p].p50)));
  console.log(timeRow("first output p99, ms", per((p) => firstStats[p].p99)));
  console.log(timeRow(`one long turn, ${sizes.n} deltas: request → end, ms (median of ${sizes.reps})`, per((p) => med(p, (t) => t.endMs))));
  console.log(rateRow(`${sizes.sessions} concurrent sessions, [[deltas ${LOAD_TURN}]]: completed turns/s`, per((p) => load[p].turns / sizes.window)));

  console.log(`\none long turn, request → last text, ms: ${PATHS.map((p) => `${p} ${ms(med(p, (t) => t.lastMs))}`).join(", ")} (LangGraph's end adds its stream's close tail to this)`);
  console.log(`one long turn, deltas/s (${sizes.n} ÷ request → end): ${PATHS.map((p) => `${p} ${Math.round(sizes.n / (med(p, (t) => t.endMs) / 1000))}`).join(", ")}`);
  const per1k = (sec: number) => ((sec * 1000) / ((sizes.reps * sizes.n) / 1000)).toFixed(1);
  const cpuOfPath = (p: PathName) => `${p} ${per1k(longCpu[p].workerd + longCpu[p].node)}${longCpu[p].workerd ? ` (workerd ${per1k(longCpu[p].workerd)}, Node ${per1k(longCpu[p].node)})` : ""}`;
  console.log(`one long turn, server CPU ms per 1k deltas (/proc, the server's process tree, 10 ms ticks): ${PATHS.filter((p) => p !== "direct").map(cpuOfPath).join(", ")}`);
  console.log(`${sizes.sessions} concurrent sessions, per-turn latency p50 / p99, ms: ${PATHS.map((p) => `${p} ${ms(stats(load[p].lat).p50)} / ${ms(stats(load[p].lat).p99)}`).join(", ")}`);
  console.log(`${sizes.sessions} concurrent sessions, server CPU ms per completed turn (/proc, the server's process tree over the windows): ${PATHS.filter((p) => p !== "direct").map((p) => `${p} ${((load[p].cpu * 1000) / load[p].turns).toFixed(1)}`).join(", ")}`);
  console.log(`errors under load: ${PATHS.map((p) => `${p} ${load[p].errors.length}`).join(", ")}${PATHS.some((p) => load[p].errors.length) ? `; first: ${PATHS.flatMap((p) => load[p].errors.slice(0, 1).map((e) => `${p}: ${e}`)).join(" | ")}` : ""}`);
  for (const [p, server] of [["langgraph", lg], ["agents", ag]] as const) if (load[p].errors.length) console.log(`${p} server's last output:\n${server.logTail().slice(-1500)}`);
  console.log(`service anomalies in the stack's log during the load phases: ${odd.watchdogKills} interrupt-watchdog kills, ${odd.harnessLost} harness processes ended unasked`);
  console.log(`checked: every measured turn's joined text equals the provider's script (${sizes.n} deltas = ${sizes.n * 4} chars for the long turn)`);
});
