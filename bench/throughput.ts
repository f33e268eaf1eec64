/**
 * Streaming throughput of one long turn, side by side in one run on the real local stack:
 *
 *   service  `POST /sessions/{id}/events` with `[[deltas 20000 size=4]]` → the turn's
 *            `session.status idle` frame on an SSE stream opened beforehand (the stream stays open
 *            across turns, so the turn's end is its last frame, not a close)
 *   direct   the same client POSTs the same directive straight to the scripted provider → [DONE]
 *            and the stream closed
 *   library  pi-agent-core's Agent + pi-ai (what the reference harness runs) in this process,
 *            same provider and directive, prompt() → resolved: the harness's own libraries with no
 *            service around them, to tell library cost from service cost. The global fetch is the
 *            harness's (runner-host/reference-harness/stream-end.ts: the provider's stream reaches
 *            the SDK in pieces), so the two run the same client code
 *
 * deltas/s = 20,000 provider deltas ÷ (request → end). The runner-host coalesces deltas (up to
 * 16 ms or 8 KiB per frame, runner-host/delta-buffer.ts), so the frame count is printed beside it;
 * "every delta arrived" is checked on the text: the joined `assistant.delta` texts must equal the
 * `assistant.message` text and the provider's script (delta i = letter i mod 26, 4 times), and the
 * reported output tokens must be 20,000.
 * Bytes on the wire = response body bytes the client read for that turn (direct: the whole
 * completion; service: every frame of the turn, including the assistant.message that repeats the
 * full text, shown separately).
 * CPU per process role (from /proc) over the measured runs says which process the time goes to.
 *
 * One unmeasured run per path first (JIT, connections, the harness process), then --reps rounds,
 * the order rotating each round.
 *
 *   npm run bench:throughput [-- --n 20000 --reps 5 | -- --short]
 */
import { Agent } from "@mariozechner/pi-agent-core";
import { resolveModel } from "../runner-host/reference-harness/model.ts";
import { harnessFetch } from "../runner-host/reference-harness/stream-end.ts";
import { anomalies, api, trackCpu, direct, harnessCommand, machine, ms, now, runBench, scriptedText, startBenchStack, startProvider, stats } from "./lib.ts";
import { benchArgs } from "./args.ts";

// The library column's provider client uses the harness's fetch (the bench's own requests use node:http).
globalThis.fetch = harnessFetch(globalThis.fetch);

const { n: N, reps: REPS } = benchArgs({ n: 20_000, reps: 5 }, { n: 2_000, reps: 1 });
const TEXT = `[[deltas ${N} size=4]]`;
const EXPECTED = scriptedText(N);

type Run = { totalMs: number; lastMs: number; bytes: number; frames: number; messageBytes: number };
type Side = "direct" | "service" | "library";

await runBench(5 * 60_000, async () => {
  const provider = await startProvider();
  const stack = await startBenchStack(provider.url, { pi: { command: harnessCommand } });
  const a = api(stack.url);
  const id = await a.create("pi");

  // The turn being measured, filled in by the stream's handler.
  type Cur = { parts: string[]; frames: number; tLast: number; message?: any; messageBytes: number; end?: { status: string; input: string; t: number; bytes: number }; wake(): void };
  let cur: Cur | undefined;
  const h = a.stream(id, (event, data, t) => {
    if (!cur) return;
    const e = JSON.parse(data);
    if (event === "assistant.delta") {
      cur.parts.push(e.data.text);
      cur.frames++;
      cur.tLast = t;
    } else if (event === "assistant.message") {
      cur.message = e;
      cur.messageBytes = Buffer.byteLength(data) + "event: assistant.message\n".length;
    } else if ((event === "session.status" && e.input_id && e.data.status !== "running") || (event === "session.error" && e.input_id)) {
      // The turn's idle status, or a session.error naming its input (a failed turn).
      cur.end = { status: event === "session.error" ? `error ${e.data.code}: ${e.data.message}` : e.data.status, input: e.input_id, t, bytes: h.bytes() };
      cur.wake();
    }
  });
  await h.ready;

  const service = async (): Promise<Run> => {
    const c: Cur = { parts: [], frames: 0, tLast: NaN, messageBytes: 0, wake: () => {} };
    cur = c;
    const done = new Promise<void>((r) => (c.wake = r));
    const bytes0 = h.bytes();
    const t0 = now();
    const input = await a.send(id, TEXT);
    await Promise.race([done, new Promise((_, no) => setTimeout(() => no(new Error("turn did not end within 60 s")), 60_000))]);
    const end = c.end!;
    if (end.input !== input || end.status !== "idle") throw new Error(`turn ended ${end.status} (${end.input} vs ${input})`);
    const joined = c.parts.join("");
    if (joined !== c.message?.data.text) throw new Error(`joined deltas (${joined.length} chars) differ from assistant.message (${c.message?.data.text.length})`);
    if (joined !== EXPECTED) throw new Error(`text differs from the provider's script (${joined.length} of ${EXPECTED.length} chars)`);
    if (c.message.data.usage.output_tokens !== N) throw new Error(`output_tokens ${c.message.data.usage.output_tokens}`);
    cur = undefined;
    return { totalMs: end.t - t0, lastMs: c.tLast - t0, bytes: end.bytes - bytes0, frames: c.frames, messageBytes: c.messageBytes };
  };

  const directRun = async (): Promise<Run> => {
    let tLast = NaN;
    const t0 = now();
    const r = await direct(provider.url, TEXT, (t) => (tLast = t));
    if (r.deltas !== N) throw new Error(`direct: ${r.deltas}/${N} deltas`);
    return { totalMs: r.tEnd - t0, lastMs: tLast - t0, bytes: r.bytes, frames: r.deltas, messageBytes: 0 };
  };

  // A fresh Agent per run, configured as the reference harness configures its sessions.
  const model = resolveModel("openai/gpt-4o-mini", { openai: { key: "sk-bench", base_url: provider.url, api: "openai-completions" } });
  const libraryRun = async (): Promise<Run> => {
    const agent = new Agent({
      initialState: { systemPrompt: "You are a helpful assistant.", model, thinkingLevel: "off", tools: [], messages: [] },
      getApiKey: () => "sk-bench",
    });
    let deltas = 0;
    let tLast = NaN;
    agent.subscribe((e) => {
      if (e.type === "message_update" && e.assistantMessageEvent.type === "text_delta") (deltas++, (tLast = now()));
    });
    const t0 = now();
    await agent.prompt(TEXT);
    const tEnd = now();
    const last: any = agent.state.messages.at(-1);
    if (deltas !== N || last?.content?.[0]?.text !== EXPECTED) throw new Error(`library: ${deltas}/${N} deltas, stop ${last?.stopReason} ${last?.errorMessage ?? ""}`);
    return { totalMs: tEnd - t0, lastMs: tLast - t0, bytes: NaN, frames: deltas, messageBytes: 0 };
  };

  const paths: Record<Side, () => Promise<Run>> = { direct: directRun, service, library: libraryRun };
  const order: Side[] = ["direct", "service", "library"];
  for (const side of order) await paths[side](); // warm-up
  const runs: Record<Side, Run[]> = { direct: [], service: [], library: [] };
  // CPU seconds per process role over the measured runs of each path: where the time goes.
  const cpu: Record<Side, Record<string, number>> = { direct: {}, service: {}, library: {} };
  for (let i = 0; i < REPS; i++) {
    for (let k = 0; k < order.length; k++) {
      const side = order[(i + k) % order.length]!;
      const tracker = trackCpu(stack, provider.pid);
      runs[side].push(await paths[side]());
      const used = tracker.stop();
      for (const key of Object.keys(used)) cpu[side][key] = (cpu[side][key] ?? 0) + used[key]!;
    }
  }
  h.close();

  const med = (rs: Run[], f: (r: Run) => number) => stats(rs.map(f)).p50;
  const D = med(runs.direct, (r) => r.totalMs);
  const line = (label: string, side: Side) => {
    const rs = runs[side];
    const total = med(rs, (r) => r.totalMs);
    const bytes = med(rs, (r) => r.bytes) / N;
    const msgShare = med(rs, (r) => r.messageBytes) / N;
    const paired = stats(rs.map((r, i) => r.totalMs / runs.direct[i]!.totalMs));
    const ratio = side === "direct" ? "1.00×" : `${paired.p50.toFixed(2)}× (${paired.min.toFixed(2)}–${paired.max.toFixed(2)})`;
    return `| ${label} | ${Math.round(N / (total / 1000))} | ${ms(total)} | ${ms(med(rs, (r) => r.lastMs))} | ${ratio} | ${Number.isNaN(bytes) ? "—" : bytes.toFixed(1)}${msgShare ? ` (${msgShare.toFixed(1)} of it the assistant.message)` : ""} | ${Math.round(med(rs, (r) => r.frames))} |`;
  };
  console.log(`\none turn of ${N} deltas (size 4), medians of ${REPS} runs per path (${machine()}; provider in its own process)\n`);
  console.log("| path | deltas/s | request → end, ms | request → last delta, ms | time ÷ direct, paired median (range) | bytes on the wire per delta | frames |");
  console.log("| --- | --- | --- | --- | --- | --- | --- |");
  console.log(line("direct: provider → client", "direct"));
  console.log(line("service: POST /events → idle frame on SSE", "service"));
  console.log(line("library: pi-agent-core Agent in the client process, no service", "library"));
  const S = med(runs.service, (r) => r.totalMs);
  const L = med(runs.library, (r) => r.totalMs);
  console.log(`\nservice ÷ direct (ratio of medians) ${(S / D).toFixed(2)}× (goal ≤ 1.1×); service ÷ library ${(S / L).toFixed(2)}×; library ÷ direct ${(L / D).toFixed(2)}×`);
  const per1k = (side: Side, keys: string[]) => keys.map((k) => `${k} ${((cpu[side][k]! * 1000) / ((REPS * N) / 1000)).toFixed(1)}`).join(", ");
  console.log(`CPU ms per 1k deltas (/proc, 10 ms ticks): service: ${per1k("service", ["harness", "svc", "workerd", "provider", "client"])}; direct: ${per1k("direct", ["provider", "client"])}; library: ${per1k("library", ["provider", "client"])}`);
  const odd = anomalies(stack);
  console.log(`service anomalies in the stack's log: ${odd.watchdogKills} interrupt-watchdog kills (no interrupt was sent), ${odd.harnessLost} harness processes ended unasked`);
  console.log(`checked every service run: joined delta text = assistant.message text = the provider's ${N} deltas (${EXPECTED.length} chars), output_tokens = ${N}`);
});
