/**
 * Streams under load on the real local stack with the reference harness: a burst of large deltas
 * reaches a client that reads as fast as it can (queued deltas of one turn are merged, so
 * `subscriber_events` cuts only a reader that really falls behind).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call } from "../helpers/api.ts";
import { openSse } from "../helpers/sse.ts";
import { ROOT, secret, startStack, type Stack } from "../helpers/stack.ts";

const env = { A: secret("limits-a"), B: secret("limits-b"), OPENAI_KEY: "sk-limits" };
let provider: ScriptedProvider;
let stack: Stack;

beforeAll(async () => {
  provider = await startScriptedProvider();
  stack = await startStack({
    config: {
      tokens: [
        { token_env: "A", tenant: "a", manage: true },
        { token_env: "B", tenant: "b", manage: true },
      ],
      harnesses: { pi: { command: ["node", `${ROOT}runner-host/reference-harness/main.ts`] } },
      providers: { openai: { api_key_env: "OPENAI_KEY", base_url: provider.url, api: "openai-completions" } },
      limits: { subscriber_events: 64, subscriber_bytes: 8 * 1024 * 1024, subscribers: 8 },
    },
    env,
  });
});
afterAll(async () => {
  await stack?.stop();
  await provider?.close();
});

async function newSession(token = env.A): Promise<string> {
  const r = await call(stack.url, "POST", "/sessions", { token, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } });
  expect(r.status).toBe(201);
  return r.body.id;
}
const sseUrl = (id: string) => `${stack.url}/sessions/${id}/events`;

describe("a burst of deltas and a healthy reader (subscriber_events 64)", () => {
  it("a turn streaming 128 large deltas back to back reaches a fast reader whole: it is not disconnected", { timeout: 60_000 }, async () => {
    const id = await newSession();
    const s = await openSse(sseUrl(id), { token: env.A });
    let ended = false;
    void s.ended.then(() => (ended = true));
    const m = await call(stack.url, "POST", `/sessions/${id}/events`, { token: env.A, body: { type: "user.message", text: "[[deltas 128 size=30000]]" } });
    expect(m.status).toBe(202);
    const idle = await s.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle", 45_000);
    expect(idle.json.input_id).toBe(m.body.id);
    expect(ended).toBe(false);
    const deltas = s.frames.filter((f) => f.event === "assistant.delta");
    const text = deltas.map((f) => f.json.data.text).join("");
    const expected = Array.from({ length: 128 }, (_, i) => String.fromCharCode(97 + (i % 26)).repeat(30000)).join("");
    expect(text.length).toBe(expected.length);
    expect(text === expected).toBe(true);
    for (const d of deltas) expect(d.json.input_id).toBe(m.body.id);
    expect(s.frames.find((f) => f.event === "assistant.message")!.json.data.text === expected).toBe(true);
    s.close();
  });
});
