/**
 * Tool round-trip overhead through the service, in one run: a host HTTP tool, and a runtime tool
 * served by an executor over SSE + HTTP and over the RPC WebSocket. Two legs per call:
 * - out: the provider's tool call (its response fully written) → the tool server receives the
 *   request / the executor receives the `call` command;
 * - back: the tool's response is written / the executor sends its reply → the next provider request.
 * Beside them, a direct `fetch` of the same host tool from Node.
 *
 *   npm run bench:tool-roundtrip [-- --samples 50 | -- --short]
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { SvcClient } from "../client/index.ts";
import { startScriptedProvider } from "../examples/scripted-provider.ts";
import { registerExecutor, rpcExecutor, sseExecutor, type CallCommand, type Executor } from "../test/helpers/executors.ts";
import { openSse } from "../test/helpers/sse.ts";
import { REFERENCE_HARNESSES, secret, startStack } from "../test/helpers/stack.ts";
import { benchArgs } from "./args.ts";

const { samples: N } = benchArgs({ samples: 50 }, { samples: 3 });
/** Warm-up turns per mode (harness start, first connections), not measured. */
const WARM = 5;

const hits: { at: number; done?: number }[] = [];
const tool = http.createServer((req, res) => {
  const hit: { at: number; done?: number } = { at: performance.now() };
  hits.push(hit);
  req.resume().on("end", () => {
    res.on("finish", () => (hit.done = performance.now()));
    res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ content: [{ type: "text", text: "ok" }] }));
  });
});
await new Promise<void>((r) => tool.listen(0, "127.0.0.1", r));
const toolUrl = `http://127.0.0.1:${(tool.address() as AddressInfo).port}/t`;
const provider = await startScriptedProvider();
const env = { TOKEN: secret("bench-tools"), KEY: "sk-bench" };
const stack = await startStack({
  config: {
    tokens: [{ token_env: "TOKEN", tenant: "b", manage: true }],
    harnesses: REFERENCE_HARNESSES,
    providers: { openai: { api_key_env: "KEY", base_url: provider.url, api: "openai-completions" } },
    tools: [{ name: "t", description: "bench tool", input_schema: { type: "object" }, url: toolUrl, tenants: ["b"] }],
  },
  env,
});
const svc = new SvcClient({ baseUrl: stack.url, token: env.TOKEN });

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

/** When the current call reached the executor, and when its reply was sent. */
const exec = { at: 0, sent: 0 };
const answer = (c: CallCommand, ex: Executor) => {
  exec.at = performance.now();
  exec.sent = performance.now();
  void ex.reply({ call_id: c.call_id, result: { content: [{ type: "text", text: "ok" }] } });
};

async function measure(bindings: object[], tools: string[], name: string, legs: () => { out: number; back: (next: number) => number }) {
  const body = { harness: "pi", config: { model: "openai/gpt-4o-mini", tools, bindings } };
  const { id } = await svc.createSession(body as Parameters<typeof svc.createSession>[0]);
  const sse = await openSse(`${stack.url}/sessions/${id}/events`, { token: env.TOKEN });
  const out: number[] = [];
  const back: number[] = [];
  for (let i = 0; i < N + WARM; i++) {
    const before = provider.requests.length;
    const m = await svc.sendMessage(id, `[[tool ${name} {"i":${i}}]]`);
    await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === m.id, 30_000);
    if (i < WARM) continue;
    const [callReq, nextReq] = provider.requests.slice(before, before + 2);
    const l = legs();
    out.push(l.out - callReq!.finishedAt!);
    back.push(l.back(nextReq!.receivedAt));
  }
  sse.close();
  return { out, back };
}

try {
  const host = await measure([], ["t"], "t", () => {
    const hit = hits.at(-1)!;
    return { out: hit.at, back: (next) => next - hit.done! };
  });
  const runtime = { name: "rt", description: "bench runtime tool", input_schema: { type: "object" } };
  const viaSse = (await registerExecutor(stack.url, env.TOKEN, { binding: "s", tools: [runtime] })).body;
  const sseEx = await sseExecutor(stack.url, viaSse, { onCall: answer });
  const sse = await measure([{ alias: "s", executor: viaSse.id }], [], "rt", () => ({ out: exec.at, back: (next) => next - exec.sent }));
  sseEx.drop();
  const viaRpc = (await registerExecutor(stack.url, env.TOKEN, { binding: "r", tools: [runtime] })).body;
  const rpcEx = await rpcExecutor(stack.url, viaRpc, { onCall: answer });
  const rpc = await measure([{ alias: "r", executor: viaRpc.id }], [], "rt", () => ({ out: exec.at, back: (next) => next - exec.sent }));
  rpcEx.drop();

  const direct: number[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await (await fetch(toolUrl, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" })).json();
    direct.push(performance.now() - t0);
  }
  const row = (label: string, xs: number[]) => `| ${label} | ${pct(xs, 50).toFixed(2)} | ${pct(xs, 99).toFixed(2)} |`;
  const both = (m: { out: number[]; back: number[] }) => m.out.map((x, i) => x + m.back[i]!);
  console.log(`| leg (${N} samples each, ms) | p50 | p99 |\n| --- | --- | --- |`);
  console.log(row("host HTTP tool: provider's tool call → tool server receives the request", host.out));
  console.log(row("host HTTP tool: tool's response → next provider request", host.back));
  console.log(row("host HTTP tool: both legs", both(host)));
  console.log(row("runtime tool, SSE + HTTP: provider's tool call → executor receives `call`", sse.out));
  console.log(row("runtime tool, SSE + HTTP: executor's reply POST → next provider request", sse.back));
  console.log(row("runtime tool, SSE + HTTP: both legs", both(sse)));
  console.log(row("runtime tool, RPC: provider's tool call → executor receives `call`", rpc.out));
  console.log(row("runtime tool, RPC: executor's reply message → next provider request", rpc.back));
  console.log(row("runtime tool, RPC: both legs", both(rpc)));
  console.log(row("direct fetch of the host tool from Node (whole round trip)", direct));
} finally {
  await stack.stop();
  await provider.close();
  tool.close();
}
