/**
 * Tool round-trip overhead through the service: from the provider's tool call (its response fully
 * written) to the tool server receiving the request, and from the tool's response to the next
 * provider request — beside a direct `fetch` of the same tool from Node, in one run.
 *
 *   npm run bench:tool-roundtrip [-- --samples 50 | -- --short]
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { startScriptedProvider } from "../examples/scripted-provider.ts";
import { openSse } from "../test/helpers/sse.ts";
import { ROOT, secret, startStack } from "../test/helpers/stack.ts";
import { benchArgs } from "./args.ts";

const { samples: N } = benchArgs({ samples: 50 }, { samples: 3 });

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
    harnesses: { pi: { command: ["node", `${ROOT}runner-host/reference-harness/main.ts`] } },
    providers: { openai: { api_key_env: "KEY", base_url: provider.url, api: "openai-completions" } },
    tools: [{ name: "t", description: "bench tool", input_schema: { type: "object" }, url: toolUrl, tenants: ["b"] }],
  },
  env,
});
const auth = { Authorization: `Bearer ${env.TOKEN}`, "Content-Type": "application/json" };

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
try {
  const id = ((await (await fetch(`${stack.url}/sessions`, { method: "POST", headers: auth, body: JSON.stringify({ harness: "pi", config: { model: "openai/gpt-4o-mini", tools: ["t"] } }) })).json()) as { id: string }).id;
  const sse = await openSse(`${stack.url}/sessions/${id}/events`, { token: env.TOKEN });
  const toTool: number[] = [];
  const backToModel: number[] = [];
  for (let i = 0; i < N + 5; i++) {
    const before = provider.requests.length;
    const m = (await (await fetch(`${stack.url}/sessions/${id}/events`, { method: "POST", headers: auth, body: JSON.stringify({ type: "user.message", text: `[[tool t {"i":${i}}]]` }) })).json()) as { id: string };
    await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === m.id, 30_000);
    if (i < 5) continue; // warm-up: harness start, first connections
    const [callReq, nextReq] = provider.requests.slice(before, before + 2);
    const hit = hits.at(-1)!;
    toTool.push(hit.at - callReq!.finishedAt!);
    backToModel.push(nextReq!.receivedAt - hit.done!);
  }
  sse.close();
  const direct: number[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await (await fetch(toolUrl, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" })).json();
    direct.push(performance.now() - t0);
  }
  const row = (label: string, xs: number[]) => `| ${label} | ${pct(xs, 50).toFixed(2)} | ${pct(xs, 99).toFixed(2)} |`;
  console.log(`| leg (${N} samples, ms) | p50 | p99 |\n| --- | --- | --- |`);
  console.log(row("provider's tool call → tool server receives the request", toTool));
  console.log(row("tool's response → next provider request", backToModel));
  console.log(row("both legs together", toTool.map((x, i) => x + backToModel[i]!)));
  console.log(row("direct fetch of the same tool from Node (whole round trip)", direct));
} finally {
  await stack.stop();
  await provider.close();
  tool.close();
}
