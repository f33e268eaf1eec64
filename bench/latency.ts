/**
 * Service-added first-output latency, side by side in one run on the real local stack:
 *
 *   service  client `POST /sessions/{id}/events` (user.message) → first `assistant.delta` frame on
 *            an SSE stream of that session opened beforehand (session creation not included)
 *   direct   the same client POSTs a streaming chat completion straight to the same scripted
 *            provider → first chunk with non-empty `delta.content`
 *   library  pi-agent-core's Agent + pi-ai (the reference harness's libraries) in this process,
 *            prompt() → first text_delta: what the harness itself cannot avoid, no service around it
 *            (with the harness's fetch, runner-host/reference-harness/stream-end.ts: the same client code)
 *
 * Same directive on every path (`[[deltas 20]]`, no ttft), warm samples interleaved with the
 * order rotating, so a noisy second on this 2-core box hits every column alike.
 *
 * Warm: one session that already had turns; its harness process is running and it is open in it.
 * Cold: every sample is a brand-new session on its OWN harness name (`cold0`, `cold1`, … — the same
 * command listed under several names in the config). The harness pool never shares a process
 * across names, so each cold sample pays placement + attach + link + spawning a fresh harness
 * process (Node start, pi-agent-core import, init) + open + the turn. The 5-minute idle eviction is
 * not configurable from the config file, and waiting it out is not bounded in time, so it is not
 * used. The log line "harness process started" for that name after the POST is checked as evidence,
 * and after each cold sample the session is closed and its process awaited gone, so processes do
 * not pile up and the next sample starts on a quiet machine.
 *
 *   npm run bench:latency [-- --warm 200 --cold 20 --warmup 50 | -- --short]
 *
 * 200 warm samples: with nearest-rank quantiles the p99 of 60 samples is their maximum, so one
 * collection pause anywhere in the run decided it; of 200 it is the third largest.
 */
import { Agent } from "@mariozechner/pi-agent-core";
import { resolveModel } from "../runner-host/reference-harness/model.ts";
import { harnessFetch } from "../runner-host/reference-harness/stream-end.ts";
import { anomalies, api, direct, harnessCommand, machine, ms, now, runBench, sleep, stackMemory, startBenchStack, startProvider, stats, tenantAuth } from "./lib.ts";
import { benchArgs } from "./args.ts";

/**
 * Unmeasured turns on the warm session first: a fresh stack's first ~45 turns are still slower
 * while workerd and the svc process compile their hot paths (bench/RESULTS.md "First output,
 * round 3"), so "warm" means a session on a stack that has served this many turns.
 */
// The library column's provider client uses the harness's fetch (the bench's own requests use node:http).
globalThis.fetch = harnessFetch(globalThis.fetch);

const { warm: WARM, cold: COLD, warmup: WARMUP } = benchArgs({ warm: 200, cold: 20, warmup: 50 }, { warm: 3, cold: 1, warmup: 2 });
const TEXT = "[[deltas 20]]";

type Watch = { cur?: { first: number; firstInput: string; idle: Map<string, string>; wake(): void }; close(): void; ready: Promise<number> };

await runBench(5 * 60_000, async () => {
  const provider = await startProvider();
  const coldNames = Array.from({ length: COLD }, (_, i) => `cold${i}`);
  // `pi` keeps one spare (the default); the cold names keep none, so each pays a process start.
  const harnesses = Object.fromEntries([["pi", { command: harnessCommand, spares: 1 }], ...coldNames.map((n) => [n, { command: harnessCommand, spares: 0 }])]);
  const stack = await startBenchStack(provider.url, harnesses, {}, { tenants: COLD });
  const a = api(stack.url);

  /** An open SSE stream on the session; `cur` collects the turn being measured. */
  const watch = (id: string, as = a): Watch => {
    const w: Watch = { close: () => {}, ready: Promise.resolve(0) };
    const h = as.stream(id, (event, data, t) => {
      const cur = w.cur;
      if (!cur) return;
      const e = JSON.parse(data);
      if (event === "assistant.delta" && Number.isNaN(cur.first)) [cur.first, cur.firstInput] = [t, e.input_id];
      // A turn ends with its idle status, or a session.error naming its input (then failed/interrupted).
      if (event === "session.status" && e.input_id && e.data.status !== "running") (cur.idle.set(e.input_id, e.data.status), cur.wake());
      if (event === "session.error" && e.input_id) (cur.idle.set(e.input_id, `error ${e.data.code}: ${e.data.message}`), cur.wake());
    });
    return Object.assign(w, { close: h.close, ready: h.ready });
  };

  /** One turn: ms from just before the POST to the first delta frame; waits for the turn's end. */
  const serviceSample = async (id: string, w: Watch, as = a): Promise<number> => {
    const cur = { first: NaN, firstInput: "", idle: new Map<string, string>(), wake: () => {} };
    w.cur = cur;
    const t0 = now();
    const input = await as.send(id, TEXT);
    const deadline = now() + 30_000;
    while (!cur.idle.has(input)) {
      if (now() > deadline) throw new Error(`turn ${input} did not end within 30 s`);
      await new Promise<void>((r) => ((cur.wake = r), setTimeout(r, 1000)));
    }
    if (cur.idle.get(input) !== "idle") throw new Error(`turn ended ${cur.idle.get(input)}: ${stack.stderr().slice(-1500)}`);
    if (cur.firstInput !== input) throw new Error("first delta belongs to another input");
    w.cur = undefined;
    return cur.first - t0;
  };

  const directSample = async (): Promise<number> => {
    let first = NaN;
    const t0 = now();
    const r = await direct(provider.url, TEXT, (t) => (first = Number.isNaN(first) ? t : first));
    if (r.deltas !== 20) throw new Error(`direct: ${r.deltas} deltas`);
    return first - t0;
  };

  // Warm: one session, WARMUP unmeasured turns (JIT, connections, the process is up), then pairs.
  const warmId = await a.create("pi");
  const ww = watch(warmId);
  await ww.ready;
  // The harness's libraries alone in this process (one long-lived Agent, as a harness session
  // keeps one): prompt() → first text_delta. Tells library time from service time.
  const agent = new Agent({
    initialState: {
      systemPrompt: "You are a helpful assistant.",
      model: resolveModel("openai/gpt-4o-mini", { openai: { key: "sk-bench", base_url: provider.url, api: "openai-completions" } }),
      thinkingLevel: "off",
      tools: [],
      messages: [],
    },
    getApiKey: () => "sk-bench",
  });
  let libFirst = NaN;
  agent.subscribe((e) => {
    if (e.type === "message_update" && e.assistantMessageEvent.type === "text_delta" && Number.isNaN(libFirst)) libFirst = now();
  });
  const librarySample = async (): Promise<number> => {
    libFirst = NaN;
    const t0 = now();
    await agent.prompt(TEXT);
    return libFirst - t0;
  };

  for (let i = 0; i < WARMUP; i++) await serviceSample(warmId, ww);
  for (let i = 0; i < 20; i++) (await directSample(), await librarySample());
  const dWarm: number[] = [];
  const sWarm: number[] = [];
  const lWarm: number[] = [];
  const warmMark = stack.mark();
  const paths = [async () => dWarm.push(await directSample()), async () => sWarm.push(await serviceSample(warmId, ww)), async () => lWarm.push(await librarySample())];
  for (let i = 0; i < WARM; i++) for (let k = 0; k < 3; k++) await paths[(i + k) % 3]!();
  // The runner-host's own "turn ended" log of the warm turns: how far the first delta had got.
  const turnLog = stack.stderr().slice(warmMark).split("\n").filter((l) => l.includes('"msg":"turn ended"'));
  const restarts = (stack.stderr().slice(warmMark).match(/"msg":"harness process started","harness":"pi"[^\n]*"spare":false/g) ?? []).length;
  const logged = (k: string) => stats(turnLog.map((l) => Number(new RegExp(`"${k}":(\\d+)`).exec(l)?.[1])));
  const harnessCount = () => stackMemory(stack).harnessCount;
  const baseProcs = harnessCount();

  // Cold: a new session on a harness name never used before; its process starts for this turn.
  const dCold: number[] = [];
  const sCold: number[] = [];
  const startups: number[] = [];
  for (const [j, name] of coldNames.entries()) {
    const id = await a.create(name);
    const w = watch(id);
    await w.ready;
    if (j % 2) dCold.push(await directSample());
    const mark = stack.mark();
    sCold.push(await serviceSample(id, w));
    if (j % 2 === 0) dCold.push(await directSample());
    const line = await stack.waitForLog(new RegExp(`"msg":"harness process started".*"harness":"${name}"`), 5_000, mark);
    startups.push(Number(/"startup_ms":(\d+)/.exec(line)?.[1]));
    w.close();
    await a.close(id);
    for (let t = 0; t < 100 && harnessCount() > baseProcs; t++) await sleep(100);
    if (harnessCount() > baseProcs) throw new Error(`the ${name} harness process did not stop after close`);
  }

  // New session of a new tenant on `pi`: it needs a process of its own (processes are per
  // harness + tenant) and takes the spare, which was started and init-answered beforehand.
  const dSpare: number[] = [];
  const sSpare: number[] = [];
  const sparesReady = () => (stack.stderr().match(/"msg":"harness process started","harness":"pi"[^\n]*"spare":true/g) ?? []).length;
  for (let j = 0; j < COLD; j++) {
    for (let t = 0; t < 100 && sparesReady() < j + 1; t++) await sleep(100);
    if (sparesReady() < j + 1) throw new Error("no spare process became ready");
    const ta = api(stack.url, tenantAuth(j + 1));
    const id = await ta.create("pi");
    const mark = stack.mark();
    const ws = watch(id, ta);
    await ws.ready;
    if (j % 2) dSpare.push(await directSample());
    sSpare.push(await serviceSample(id, ws, ta));
    if (j % 2 === 0) dSpare.push(await directSample());
    await stack.waitForLog(/"msg":"spare harness process taken","harness":"pi"/, 5_000, mark);
    ws.close();
    await ta.close(id);
  }
  ww.close();

  const paired = (s: number[], d: number[]) => stats(s.map((x, i) => x - d[i]!)).p50;
  const D = stats([...dWarm, ...dCold, ...dSpare]);
  const W = stats(sWarm);
  const C = stats(sCold);
  const row = (label: string, s: ReturnType<typeof stats>, pairedDiff: number) =>
    `| ${label} | ${s.n} | ${ms(s.p50)} | ${ms(s.p99)} | ${ms(s.p50 - D.p50)} | ${ms(s.p99 - D.p99)} | ${ms(pairedDiff)} | ${(s.p50 / D.p50).toFixed(1)}× | ${(s.p99 / D.p99).toFixed(1)}× |`;
  console.log(`\nfirst output, ms (${machine()}; ${TEXT}; scripted provider in its own process; stack = svc -config)\n`);
  console.log("| path | n | p50 | p99 | added p50 (− direct p50) | added p99 (− direct p99) | added, paired median | ratio p50 | ratio p99 |");
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  console.log(`| direct: provider first token, same client | ${D.n} | ${ms(D.p50)} | ${ms(D.p99)} | — | — | — | 1.0× | 1.0× |`);
  console.log(row("library: pi-agent-core Agent in the client process, no service", stats(lWarm), paired(lWarm, dWarm)));
  console.log(row("service, warm harness (session had a turn)", W, paired(sWarm, dWarm)));
  console.log(row("service, cold harness (new session, new harness process; spares 0)", C, paired(sCold, dCold)));
  console.log(row("service, new session of a new tenant, spare process ready (spares 1)", stats(sSpare), paired(sSpare, dSpare)));
  const S = stats(startups);
  const odd = anomalies(stack);
  console.log(`\nservice anomalies in the stack's log: ${odd.watchdogKills} interrupt-watchdog kills (no interrupt was sent), ${odd.harnessLost} harness processes ended unasked`);
  console.log(`warm phase: ${restarts} restarts of the warm session's harness process (0 = every warm sample was truly warm)`);
  console.log(`warm, from the runner-host's log (ms since the object accepted the message, 1 ms clock): harness run started p50 ${logged("queue_delay_ms").p50}, first delta handed to the link p50 ${logged("first_output_ms").p50} (${turnLog.length} turns)`);
  console.log(`cold: harness process start (spawn → init answered, from the runner-host's log) p50 ${S.p50} ms, max ${S.max} ms, over ${S.n} starts`);
});
