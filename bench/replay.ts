/**
 * Replay rate of a long log: retained events/s delivered to a fresh SSE client, beside the same
 * log read as JSON pages and through the typed client's resumable stream (client/), on the real
 * local stack, in one run.
 *
 *   npm run bench:replay [-- --events 10000 --text 200 | -- --short]
 */
import { EventSourceParserStream } from "eventsource-parser/stream";
import { SvcClient } from "../client/index.ts";
import { REFERENCE_HARNESS_COMMAND, secret, startStack } from "../test/helpers/stack.ts";
import { benchArgs } from "./args.ts";

const sizes = benchArgs({ events: 10_000, text: 200 }, { events: 300, text: 200 });
const N = sizes.events;
const TEXT = "x".repeat(sizes.text);

const env = { TOKEN: secret("bench"), KEY: "sk-bench" };
const stack = await startStack({
  config: {
    tokens: [{ token_env: "TOKEN", tenant: "bench", manage: true }],
    harnesses: { pi: { command: REFERENCE_HARNESS_COMMAND } },
    providers: { openai: { api_key_env: "KEY" } },
    limits: { queue: 1024 },
  },
  env,
  // No runner-host: messages stay queued, so the log grows with user.message events only.
  runner: false,
});
const auth = { Authorization: `Bearer ${env.TOKEN}` };
const svc = new SvcClient({ baseUrl: stack.url, token: env.TOKEN });

try {
  const id = (await svc.createSession({ harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } })).id;
  // Seed: bursts of 1000 queued messages, cancelled by an interrupt (+1001 events) and resumed.
  const t0 = performance.now();
  let seeded = 0;
  while (seeded < N) {
    const burst = Math.min(1000, N - seeded);
    for (let i = 0; i < burst; i += 8) {
      await Promise.all(Array.from({ length: Math.min(8, burst - i) }, () => svc.sendMessage(id, TEXT)));
    }
    await svc.interrupt(id);
    await svc.resume(id);
    seeded += burst * 2 + 2;
  }
  let total = 0;
  for (let after = ""; ; ) {
    const p = await svc.events(id, { after, limit: 1000 });
    if (p.events.length === 0) break;
    total += p.events.length;
    after = p.next_cursor;
  }
  console.log(`seeded ${total} retained events in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  const measure = async (label: string, fn: () => Promise<number>) => {
    const runs: number[] = [];
    for (let r = 0; r < 3; r++) {
      const s = performance.now();
      const n = await fn();
      runs.push(n / ((performance.now() - s) / 1000));
    }
    runs.sort((a, b) => a - b);
    return { label, median: runs[1]! };
  };

  const sse = await measure("SSE replay to a fresh client", async () => {
    const ctl = new AbortController();
    const res = await fetch(`${stack.url}/sessions/${id}/events`, { headers: { ...auth, Accept: "text/event-stream" }, signal: ctl.signal });
    const reader = res.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
    let n = 0;
    while (n < total) {
      const { done } = await reader.read();
      if (done) break;
      n += 1;
    }
    ctl.abort();
    return n;
  });
  const typed = await measure("typed client stream (client/)", async () => {
    let n = 0;
    for await (const _ of svc.stream(id)) if (++n >= total) break;
    return n;
  });
  const json = await measure("JSON pages (limit 1000)", async () => {
    let n = 0;
    for (let after = ""; ; ) {
      const p: any = await (await fetch(`${stack.url}/sessions/${id}/events?limit=1000&after=${after}`, { headers: auth })).json();
      if (p.events.length === 0) return n;
      n += p.events.length;
      after = p.next_cursor;
    }
  });
  console.log(`\n| read path | events/s (median of 3) | ratio to JSON pages |\n| --- | --- | --- |`);
  for (const r of [sse, typed, json]) console.log(`| ${r.label} | ${Math.round(r.median)} | ${(r.median / json.median).toFixed(2)} |`);
} finally {
  await stack.stop();
}
