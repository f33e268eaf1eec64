/**
 * Executors end to end (spec "Executors", "Executor objects", Authentication 7): registration,
 * the SSE command stream with HTTP replies, the RPC WebSocket, close, runtime tools in sessions
 * through bindings, and every way a runtime call can end — on the real local stack with the real
 * reference harness, a scripted provider, and real clients (fetch + eventsource-parser, ws).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call, expectApiError } from "../helpers/api.ts";
import { registerExecutor, rpcExecutor, sseExecutor, type CallCommand, type Executor } from "../helpers/executors.ts";
import { openSse, type SseStream } from "../helpers/sse.ts";
import { ROOT, secret, startStack, type Stack } from "../helpers/stack.ts";

const env = {
  MANAGE: secret("ex-manage"),
  WRITER: secret("ex-writer"),
  READER: secret("ex-reader"),
  OTHER: secret("ex-other"),
  OPENAI_KEY: "sk-executors",
};

const LOOKUP = {
  name: "lookup",
  description: "looks a word up in the client's dictionary",
  input_schema: { type: "object", properties: { word: { type: "string" }, lang: { type: "string" } }, required: ["word", "lang"] },
};
const SLOW = { name: "slow_job", description: "a job the test answers when it wants", input_schema: { type: "object" } };

let provider: ScriptedProvider;
let stack: Stack;

beforeAll(async () => {
  provider = await startScriptedProvider();
  stack = await startStack({
    config: {
      tokens: [
        { token_env: "MANAGE", tenant: "t", manage: true },
        { token_env: "WRITER", tenant: "t" },
        { token_env: "READER", tenant: "t", read_only: true, manage: true },
        { token_env: "OTHER", tenant: "other", manage: true },
      ],
      harnesses: { pi: { command: ["node", `${ROOT}runner-host/reference-harness/main.ts`] } },
      providers: { openai: { api_key_env: "OPENAI_KEY", base_url: provider.url, api: "openai-completions" } },
    },
    env,
  });
});
afterAll(async () => {
  await stack?.stop();
  await provider?.close();
});

async function register(tools: object[] = [LOOKUP], binding = "dict"): Promise<{ id: string; token: string }> {
  const r = await registerExecutor(stack.url, env.MANAGE, { binding, tools });
  expect(r.status).toBe(201);
  return r.body;
}

type S = { id: string; sse: SseStream };
async function session(bindings: object[], tools: string[] = []): Promise<S> {
  const r = await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools, bindings } } });
  expect(r.status, r.text).toBe(201);
  return { id: r.body.id, sse: await openSse(`${stack.url}/sessions/${r.body.id}/events`, { token: env.MANAGE }) };
}
async function send(s: S, text: string): Promise<string> {
  const r = await call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: { type: "user.message", text } });
  expect(r.status).toBe(202);
  return r.body.id;
}
const settled = (s: S, input: string) =>
  s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status !== "running" && f.json.input_id === input, 30_000);
const results = (s: S) => s.sse.frames.filter((f) => f.event === "tool.result").map((f) => f.json);
const callOf = (ex: Executor) => ex.waitFor((c) => c.type === "call") as Promise<CallCommand>;

describe("runtime tools over SSE + HTTP", () => {
  it("the model's call reaches the executor with parameters merged, progress becomes tool.progress, the result goes back to the model", async () => {
    const cred = await register();
    const ex = await sseExecutor(stack.url, cred);
    expect(ex.frames[0]).toEqual({ id: undefined, event: "ready" });
    expect(ex.connection).toMatch(/^[0-9a-f]{32}$/);
    const s = await session([{ alias: "dict", executor: cred.id, parameters: { lang: "fr" } }]);
    const created = await call(stack.url, "GET", `/sessions/${s.id}`, { token: env.MANAGE });
    // The model sees the descriptor without the parameter it cannot set.
    expect(created.body.descriptors).toEqual([{ ...LOOKUP, input_schema: { type: "object", properties: { word: { type: "string" } }, required: ["word"] } }]);

    const input = await send(s, '[[tool lookup {"word":"chat"}]]');
    const c = await callOf(ex);
    const toolCall = await s.sse.waitFor((f) => f.event === "tool.call");
    expect(c).toEqual({
      type: "call",
      connection: ex.connection,
      call_id: toolCall.json.id,
      tool: "lookup",
      arguments: { word: "chat", lang: "fr" },
      scope: { tenant_id: "t", session_id: s.id, call_id: toolCall.json.id },
    });
    expect(toolCall.json.data.arguments).toEqual({ word: "chat" });
    expect(await ex.reply({ call_id: c.call_id, progress: { step: 1 } })).toEqual({ status: 200, body: { status: "accepted" } });
    const progress = await s.sse.waitFor((f) => f.event === "tool.progress");
    expect(progress.json.data).toEqual({ call_id: c.call_id, data: { step: 1 } });
    expect(progress.id).toBeUndefined();
    expect(await ex.reply({ call_id: c.call_id, result: { content: [{ type: "text", text: "cat" }] } })).toEqual({ status: 200, body: { status: "accepted" } });
    await settled(s, input);
    expect(results(s).map((r) => r.data)).toEqual([{ call_id: c.call_id, result: { content: [{ type: "text", text: "cat" }] } }]);
    expect(s.sse.frames.filter((f) => f.event === "assistant.message").at(-1)!.json.data.text).toBe("tool lookup returned: cat");
    // The call is answered: a second result, or progress after it, is refused.
    expectApiError(await replyRaw(ex, { call_id: c.call_id, result: { content: [] } }), 409, "conflict");
    expectApiError(await replyRaw(ex, { call_id: c.call_id, progress: 2 }), 409, "conflict");
    for (const f of ex.frames) expect(f.id).toBeUndefined();
    ex.drop();
    s.sse.close();
  });
});

async function replyRaw(ex: Executor, body: Record<string, unknown>, token = ex.token) {
  return call(stack.url, "POST", `/executors/${ex.id}/responses`, { token, body: { connection: ex.connection, ...body } });
}

describe("runtime tools over RPC", () => {
  it("one socket carries ready, calls and replies; only svc-rpc is echoed", async () => {
    const cred = await register([SLOW], "jobs");
    const ex = await rpcExecutor(stack.url, cred);
    expect(ex.protocol).toBe("svc-rpc");
    const s = await session([{ alias: "jobs", executor: cred.id }]);
    const input = await send(s, "[[tool slow_job {}]]");
    const c = await callOf(ex);
    await ex.reply({ call_id: c.call_id, progress: "half" });
    await s.sse.waitFor((f) => f.event === "tool.progress");
    await ex.reply({ call_id: c.call_id, result: { content: [{ type: "text", text: "done" }], structured_content: { n: 1 } } });
    await settled(s, input);
    expect(results(s)[0].data.result).toEqual({ content: [{ type: "text", text: "done" }], structured_content: { n: 1 } });
    // A failed reply is answered on the socket, naming the call.
    await ex.reply({ call_id: c.call_id, result: { content: [] } });
    expect(await ex.waitError((e) => e.call_id === c.call_id)).toEqual({ error: { code: "conflict", message: expect.any(String) }, call_id: c.call_id });
    ex.send("{not json");
    expect((await ex.waitError((e) => e.error.code === "invalid_request")).call_id).toBeUndefined();
    ex.drop();
    s.sse.close();
  });
});
