/**
 * Executors end to end (docs/api.md "Executors", "Executor authentication"): registration,
 * the SSE command stream with HTTP replies, the RPC WebSocket, close, runtime tools in sessions
 * through bindings, and every way a runtime call can end — on the real local stack with the real
 * reference harness, a scripted provider, and real clients (fetch + eventsource-parser, ws).
 */
import { spawn } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, expectApiError } from "../helpers/api.ts";
import { registerExecutor, rpcExecutor, sseExecutor, type CallCommand, type Executor } from "../helpers/executors.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { openSse, type SseStream } from "../helpers/sse.ts";
import { ROOT, secret, type Stack, startScriptedStack, type ScriptedStack } from "../helpers/stack.ts";

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

let rig: ScriptedStack;
let stack: Stack;

beforeAll(async () => {
  rig = await startScriptedStack({
    config: {
      tokens: [
        { token_env: "MANAGE", tenant: "t", manage: true },
        { token_env: "WRITER", tenant: "t" },
        { token_env: "READER", tenant: "t", read_only: true, manage: true },
        { token_env: "OTHER", tenant: "other", manage: true },
      ],
    },
    env,
  });
  ({ stack } = rig);
});
afterAll(() => rig?.stop());

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
  it("one socket carries ready, calls and replies; only svc-rpc is echoed; a Close frame is answered", async () => {
    const cred = await register([SLOW], "jobs");
    const ex = await rpcExecutor(stack.url, cred);
    expect(ex.protocol).toBe("svc-rpc");
    const s = await session([{ alias: "jobs", executor: cred.id }]);
    const input = await send(s, "[[tool slow_job {}]]");
    const c = await callOf(ex);
    await ex.reply({ call_id: c.call_id, progress: "half" });
    await s.sse.waitFor((f) => f.event === "tool.progress");
    // A leading byte-order mark is dropped, as from the same Reply sent as a request body.
    ex.send(`\ufeff${JSON.stringify({ connection: ex.connection, call_id: c.call_id, progress: "bom" })}`);
    await s.sse.waitFor((f) => f.event === "tool.progress" && f.json.data.data === "bom");
    await ex.reply({ call_id: c.call_id, result: { content: [{ type: "text", text: "done" }], structured_content: { n: 1 } } });
    await settled(s, input);
    expect(results(s)[0].data.result).toEqual({ content: [{ type: "text", text: "done" }], structured_content: { n: 1 } });
    // A failed reply is answered on the socket, naming the call.
    await ex.reply({ call_id: c.call_id, result: { content: [] } });
    expect(await ex.waitError((e) => e.call_id === c.call_id)).toEqual({ error: { code: "conflict", message: expect.any(String) }, call_id: c.call_id });
    ex.send("{not json");
    expect((await ex.waitError((e) => e.error.code === "invalid_request")).call_id).toBeUndefined();
    // A binary message is a Reply in strict UTF-8, as a request body is.
    ex.send(new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]));
    expect(await ex.waitError((e) => e.error.message === "message is not valid UTF-8")).toEqual({ error: { code: "invalid_request", message: "message is not valid UTF-8" } });
    // The executor's Close frame is answered with one (without it, `ws` reports 1006 when the connection drops).
    expect(await ex.close(4000)).toBe(4000);
    s.sse.close();
  });
});

describe("registration and executor authentication", () => {
  it("POST /executors needs management authority and a strict body; returns a 32-hex id and a hex token", async () => {
    const good = { binding: "dict", tools: [LOOKUP] };
    const r = await registerExecutor(stack.url, env.MANAGE, good);
    expect(r.status).toBe(201);
    expect(Object.keys(r.body).sort()).toEqual(["id", "token"]);
    expect(r.body.id).toMatch(/^[0-9a-f]{32}$/);
    expect(r.body.token).toMatch(/^[0-9a-f]{64}$/);
    expectApiError(await call(stack.url, "POST", "/executors", { body: good }), 401, "forbidden");
    expectApiError(await call(stack.url, "POST", "/executors", { token: env.WRITER, body: good }), 403, "forbidden");
    expectApiError(await call(stack.url, "POST", "/executors", { token: env.READER, body: good }), 403, "forbidden");
    const bad: [string, unknown][] = [
      ["unknown field", { ...good, extra: 1 }],
      ["unknown descriptor field", { binding: "dict", tools: [{ ...LOOKUP, url: "http://x" }] }],
      ["a descriptor without input_schema", { binding: "dict", tools: [{ name: "x", description: "y" }] }],
      ["a bad tool name", { binding: "dict", tools: [{ ...LOOKUP, name: "no-dashes" }] }],
      ["a name listed twice", { binding: "dict", tools: [LOOKUP, LOOKUP] }],
      ["no tools", { binding: "dict", tools: [] }],
      ["an empty binding", { binding: "", tools: [LOOKUP] }],
      ["a session that is no id", { ...good, session: "nope" }],
    ];
    for (const [what, body] of bad) {
      const res = await call(stack.url, "POST", "/executors", { token: env.MANAGE, body });
      expect(res.status, what).toBe(400);
      expectApiError(res, 400, "invalid_request");
    }
  });

  it("executor endpoints: unknown id 404, missing or wrong token 401, and the token of one executor opens no other", async () => {
    const a = await register();
    const b = await register();
    const unknown = "0".repeat(32);
    expectApiError(await call(stack.url, "GET", `/executors/${unknown}/commands`, { token: a.token }), 404, "not_found");
    expectApiError(await call(stack.url, "GET", `/executors/nothex/commands`, { token: a.token }), 404, "not_found");
    expectApiError(await call(stack.url, "GET", `/executors/${a.id}/commands`, {}), 401, "forbidden");
    expectApiError(await call(stack.url, "GET", `/executors/${a.id}/commands`, { token: b.token }), 401, "forbidden");
    expectApiError(await call(stack.url, "GET", `/executors/${a.id}/commands`, { token: env.MANAGE }), 401, "forbidden");
    const reply = { connection: "a".repeat(32), call_id: "b".repeat(32), progress: 1 };
    expectApiError(await call(stack.url, "POST", `/executors/${a.id}/responses`, { token: b.token, body: reply }), 401, "forbidden");
    expectApiError(await call(stack.url, "POST", `/executors/${unknown}/responses`, { token: a.token, body: reply }), 404, "not_found");
    expectApiError(await call(stack.url, "POST", `/executors/${a.id}/close`, { token: b.token }), 401, "forbidden");
    // With the right token: a reply naming no connection of the executor, or malformed.
    expectApiError(await call(stack.url, "POST", `/executors/${a.id}/responses`, { token: a.token, body: reply }), 409, "conflict");
    expectApiError(await call(stack.url, "POST", `/executors/${a.id}/responses`, { token: a.token, body: { ...reply, result: { content: [] } } }), 400, "invalid_request");
    expectApiError(await call(stack.url, "POST", `/executors/${a.id}/responses`, { token: a.token, body: { ...reply, extra: true } }), 400, "invalid_request");
    // unknown_outcome says a failure came after dispatch: a success cannot claim it.
    const { progress: _p, ...callRef } = reply;
    const claims = await call(stack.url, "POST", `/executors/${a.id}/responses`, { token: a.token, body: { ...callRef, result: { content: [], unknown_outcome: true } } });
    expectApiError(claims, 400, "invalid_request");
    expect(claims.body.error.message).toContain("unknown_outcome is for an error result");
    // An image a model provider could not take.
    for (const [image, problem] of [
      [{ type: "image", data: "%%not base64%%", mime_type: "image/png" }, "result: content[0].data: not base64"],
      [{ type: "image", data: "AAAA", mime_type: "not a type" }, "result: content[0].mime_type: not a media type"],
    ] as const) {
      const bad = await call(stack.url, "POST", `/executors/${a.id}/responses`, { token: a.token, body: { ...callRef, result: { content: [image] } } });
      expectApiError(bad, 400, "invalid_request");
      expect(bad.body.error.message).toContain(problem);
    }
    expectApiError(await call(stack.url, "POST", `/executors/${a.id}/responses`, { token: a.token, raw: '{"connection":"x"} {}' }), 400, "invalid_request");
    const rpc = await call(stack.url, "GET", `/executors/${a.id}/rpc`, { token: a.token });
    expectApiError(rpc, 400, "invalid_request"); // not an upgrade
  });

  it("the RPC upgrade: unknown id 404, a missing or wrong token 401, any Origin 403, svc-rpc required", async () => {
    const a = await register();
    const ws = (await import("ws")).default;
    const upgrade = (path: string, protocols: string[], origin?: string) =>
      new Promise<number>((resolve) => {
        const sock = new ws(`${stack.url.replace("http", "ws")}${path}`, protocols, origin ? { origin } : {});
        sock.on("unexpected-response", (_q, res) => resolve(res.statusCode ?? 0));
        sock.on("open", () => (sock.close(), resolve(101)));
        sock.on("error", () => {});
      });
    expect(await upgrade(`/executors/${"0".repeat(32)}/rpc`, ["svc-rpc", `svc-auth.${a.token}`])).toBe(404);
    expect(await upgrade("/executors/zz/rpc", ["svc-rpc", `svc-auth.${a.token}`])).toBe(404);
    // The handshake is judged before the id, a malformed one too.
    for (const id of ["zz", "0".repeat(32)]) expect((await fetch(`${stack.url}/executors/${id}/rpc`)).status).toBe(400);
    expect(await upgrade(`/executors/${a.id}/rpc`, ["svc-rpc"])).toBe(401);
    expect(await upgrade(`/executors/${a.id}/rpc`, ["svc-rpc", `svc-auth.${"f".repeat(64)}`])).toBe(401);
    expect(await upgrade(`/executors/${a.id}/rpc`, ["svc-rpc", `svc-auth.${a.token}`], "http://localhost:3000")).toBe(403);
    expect(await upgrade(`/executors/${a.id}/rpc`, [`svc-auth.${a.token}`])).toBe(400);
    expect(await upgrade(`/executors/${a.id}/rpc`, ["svc-rpc", `svc-auth.${a.token}`])).toBe(101);

    // A handshake the runtime would refuse in plain text is refused by the service, in its own shape.
    const http = await import("node:http");
    const raw = (headers: Record<string, string>) =>
      new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
        const req = http.request(`${stack.url}/executors/${a.id}/rpc`, {
          headers: { Connection: "Upgrade", Upgrade: "websocket", "Sec-WebSocket-Protocol": `svc-rpc, svc-auth.${a.token}`, ...headers },
        });
        req.on("response", (res) => {
          let body = "";
          res.on("data", (c: Buffer) => (body += c));
          res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
        });
        req.on("upgrade", (res, socket) => (socket.destroy(), resolve({ status: 101, headers: res.headers, body: "" })));
        req.on("error", reject);
        req.end();
      });
    const key = Buffer.alloc(16, 7).toString("base64");
    for (const [headers, message] of [
      [{ "Sec-WebSocket-Version": "8", "Sec-WebSocket-Key": key }, "Sec-WebSocket-Version must be 13"],
      [{ "Sec-WebSocket-Version": "13" }, "Sec-WebSocket-Key must be 16 bytes in base64"],
      [{ "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "short" }, "Sec-WebSocket-Key must be 16 bytes in base64"],
    ] as const) {
      const res = await raw(headers);
      expect(res.status, message).toBe(400);
      expect(res.headers["x-request-id"]).toMatch(/^[0-9a-f]{32}$/);
      expect(res.headers["x-content-type-options"]).toBe("nosniff");
      expect(JSON.parse(res.body)).toEqual({ error: { code: "invalid_request", message }, request_id: res.headers["x-request-id"] });
    }
    expect((await raw({ "Sec-WebSocket-Version": "8", "Sec-WebSocket-Key": key })).headers["sec-websocket-version"]).toBe("13");
    expect((await raw({ "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": key })).status).toBe(101);
  });

  it("a session names executors of its own tenant, for their alias, with their descriptors", async () => {
    const a = await register();
    const mk = (bindings: object[], tools: string[] = [], token = env.MANAGE) =>
      call(stack.url, "POST", "/sessions", { token, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools, bindings } } });
    expect((await mk([{ alias: "dict", executor: a.id, runtime: [LOOKUP] }])).status).toBe(201);
    expect((await mk([{ alias: "dict", executor: a.id.toUpperCase() }])).status).toBe(201);
    expectApiError(await mk([{ alias: "dict", executor: "0".repeat(32) }]), 400, "invalid_request");
    expectApiError(await mk([{ alias: "other_alias", executor: a.id }]), 400, "invalid_request");
    expectApiError(await mk([{ alias: "dict", executor: a.id, runtime: [{ ...LOOKUP, description: "changed" }] }]), 400, "invalid_request");
    expectApiError(await mk([{ alias: "dict", runtime: [LOOKUP] }]), 400, "invalid_request");
    expectApiError(await mk([{ alias: "dict", executor: a.id, parameters: [1] }]), 400, "invalid_request");
    // Another tenant's executor looks unknown.
    expectApiError(await mk([{ alias: "dict", executor: a.id }], [], env.OTHER), 400, "invalid_request");
    // A runtime tool name clashing with another tool of the session.
    const b = await register([LOOKUP], "dict2");
    expectApiError(await mk([{ alias: "dict", executor: a.id }, { alias: "dict2", executor: b.id }]), 400, "invalid_request");
    // operations narrows the group.
    const c = await register([LOOKUP, SLOW], "both");
    const narrowed = await mk([{ alias: "both", executor: c.id, operations: ["slow_job"] }]);
    expect(narrowed.body.descriptors.map((d: { name: string }) => d.name)).toEqual(["slow_job"]);
  });
});

describe("how a runtime call ends", () => {
  it("a stream dropped mid-call: the call ends with unknown_outcome, a new connection makes the old one stale, nothing is replayed", async () => {
    const cred = await register([SLOW], "jobs");
    const first = await sseExecutor(stack.url, cred);
    const s = await session([{ alias: "jobs", executor: cred.id }]);
    const input = await send(s, "[[tool slow_job {}]]");
    const c = await callOf(first);
    const second = await sseExecutor(stack.url, cred);
    expect(second.connection).not.toBe(first.connection);
    await first.ended; // the older stream is ended by the server
    await settled(s, input);
    expect(results(s)).toHaveLength(1);
    expect(results(s)[0].data.result).toMatchObject({ is_error: true, unknown_outcome: true });
    expect(s.sse.frames.filter((f) => f.event === "session.status").at(-1)!.json.data.status).toBe("idle");
    // The old connection's late reply is refused; the new connection never sees the old call.
    expectApiError(await replyRaw(first, { call_id: c.call_id, result: { content: [] } }), 409, "conflict");
    expect(second.commands.map((x) => x.type)).toEqual(["ready"]);
    // The next call goes to the new connection.
    const next = await send(s, "[[tool slow_job {}]]");
    const c2 = await callOf(second);
    expect(c2.connection).toBe(second.connection);
    expect((await second.reply({ call_id: c2.call_id, result: { content: [{ type: "text", text: "ok" }] } })).status).toBe(200);
    await settled(s, next);
    second.drop();
    s.sse.close();
  });

  it("an executor killed mid-call (its socket dies): the call ends with unknown_outcome and the turn goes on", async () => {
    const cred = await register([SLOW], "jobs");
    const ex = await rpcExecutor(stack.url, cred);
    const s = await session([{ alias: "jobs", executor: cred.id }]);
    const input = await send(s, "[[tool slow_job {}]]");
    await callOf(ex);
    ex.drop(); // no close frame: the TCP connection just dies
    await settled(s, input);
    expect(results(s)).toHaveLength(1);
    expect(results(s)[0].data.result).toMatchObject({ is_error: true, unknown_outcome: true });
    expect(s.sse.frames.filter((f) => f.event === "session.status").at(-1)!.json.data.status).toBe("idle");
    s.sse.close();
  });

  it("an executor process killed mid-call (SSE): its stream's end is noticed and the call ends with unknown_outcome", async () => {
    const cred = await register([SLOW], "jobs");
    const child = spawn(process.execPath, [`${ROOT}test/fixtures/sse-executor.ts`, stack.url, cred.id, cred.token], { stdio: ["ignore", "pipe", "inherit"] });
    const lines: string[] = [];
    const waitLine = (re: RegExp) =>
      new Promise<string>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`executor process printed no ${re}; got ${lines.join("|")}`)), 20_000);
        const check = () => {
          const l = lines.find((x) => re.test(x));
          if (l) (clearTimeout(t), child.stdout!.off("data", onData), resolve(l));
        };
        const onData = (d: Buffer) => (lines.push(...d.toString().split("\n").filter(Boolean)), check());
        child.stdout!.on("data", onData);
        check();
      });
    await waitLine(/"type":"ready"/);
    const s = await session([{ alias: "jobs", executor: cred.id }]);
    const input = await send(s, "[[tool slow_job {}]]");
    await waitLine(/"type":"call"/);
    child.kill("SIGKILL");
    // Behind the local proxy the Worker learns of the vanished client at its next write: a keepalive.
    await settled(s, input);
    expect(results(s)).toHaveLength(1);
    expect(results(s)[0].data.result).toMatchObject({ is_error: true, unknown_outcome: true });
    s.sse.close();
  });

  it("a call to an executor that is not connected fails at once, without unknown_outcome", async () => {
    const cred = await register([SLOW], "jobs");
    const s = await session([{ alias: "jobs", executor: cred.id }]);
    const input = await send(s, "[[tool slow_job {}]]");
    await settled(s, input);
    expect(results(s)[0].data.result.is_error).toBe(true);
    expect(results(s)[0].data.result.unknown_outcome).toBeUndefined();
    s.sse.close();
  });

  it("an interrupt with a pending call: exactly one tool.result before the turn's session.error; the executor gets cancel; a late reply is refused", async () => {
    const cred = await register([SLOW], "jobs");
    const ex = await sseExecutor(stack.url, cred);
    const s = await session([{ alias: "jobs", executor: cred.id }]);
    await send(s, "[[tool slow_job {}]]");
    const c = await callOf(ex);
    await call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: { type: "user.interrupt" } });
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "interrupted");
    const cancel = await ex.waitFor((x) => x.type === "cancel");
    expect(cancel).toEqual({ type: "cancel", connection: ex.connection, call_id: c.call_id });
    expect(results(s)).toHaveLength(1);
    expect(results(s)[0].data.result).toMatchObject({ is_error: true, unknown_outcome: true });
    const order = s.sse.frames.map((f) => f.event);
    expect(order.indexOf("tool.result")).toBeLessThan(order.indexOf("session.error"));
    expectApiError(await replyRaw(ex, { call_id: c.call_id, result: { content: [] } }), 409, "conflict");
    ex.drop();
    s.sse.close();
  });

  it("a session closed with a pending call: one tool.result before the turn's session.error, and the executor gets cancel", async () => {
    const cred = await register([SLOW], "jobs");
    const ex = await rpcExecutor(stack.url, cred);
    const s = await session([{ alias: "jobs", executor: cred.id }]);
    await send(s, "[[tool slow_job {}]]");
    const c = await callOf(ex);
    expect((await call(stack.url, "POST", `/sessions/${s.id}/close`, { token: env.MANAGE })).status).toBe(202);
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "closed");
    expect(await ex.waitFor((x) => x.type === "cancel")).toMatchObject({ call_id: c.call_id });
    expect(results(s)).toHaveLength(1);
    expect(results(s)[0].data.result).toMatchObject({ is_error: true, unknown_outcome: true });
    const order = s.sse.frames.map((f) => f.event);
    expect(order.indexOf("tool.result")).toBeLessThan(order.indexOf("session.error"));
    ex.drop();
    s.sse.close();
  });

  it("close with a pending call: unknown_outcome for it, the stream ends, later calls fail at once and the executor refuses everything", async () => {
    const cred = await register([SLOW], "jobs");
    const ex = await sseExecutor(stack.url, cred);
    const s = await session([{ alias: "jobs", executor: cred.id }]);
    const input = await send(s, "[[tool slow_job {}]]");
    await callOf(ex);
    const closed = await call(stack.url, "POST", `/executors/${cred.id}/close`, { token: cred.token });
    expect({ status: closed.status, body: closed.body }).toEqual({ status: 200, body: { status: "closed" } });
    await ex.ended;
    await settled(s, input);
    expect(results(s)[0].data.result).toMatchObject({ is_error: true, unknown_outcome: true });
    const later = await send(s, "[[tool slow_job {}]]");
    await settled(s, later);
    const r2 = results(s)[1].data.result;
    expect(r2.is_error).toBe(true);
    expect(r2.unknown_outcome).toBeUndefined();
    expect((await call(stack.url, "POST", `/executors/${cred.id}/close`, { token: cred.token })).body).toEqual({ status: "closed" });
    expectApiError(await call(stack.url, "GET", `/executors/${cred.id}/commands`, { token: cred.token }), 409, "conflict");
    expectApiError(await replyRaw(ex, { call_id: "c".repeat(32), progress: 1 }), 409, "conflict");
    s.sse.close();
  });
});

describe("runtime results are checked like host tool results", () => {
  it("a result failing the descriptor's output_schema becomes an error with unknown_outcome; a reply over the body cap is 413 and the call still waits", async () => {
    const typed = { name: "typed", description: "d", input_schema: { type: "object" }, output_schema: { type: "object", required: ["n"] } };
    const cred = await register([typed], "typed");
    const ex = await sseExecutor(stack.url, cred);
    const s = await session([{ alias: "typed", executor: cred.id }]);
    const input = await send(s, "[[tool typed {}]]");
    const c = await callOf(ex);
    // limits.input_bytes is 65536 here: the body cap is 65536 + 16384 bytes.
    const cap = 65536 + 16384;
    const over = { connection: ex.connection, call_id: c.call_id, result: { content: [{ type: "text", text: "" }] } };
    over.result.content[0]!.text = "x".repeat(cap - JSON.stringify(over).length + 1);
    expect(JSON.stringify(over).length).toBe(cap + 1);
    expectApiError(await call(stack.url, "POST", `/executors/${ex.id}/responses`, { token: ex.token, raw: JSON.stringify(over) }), 413, "invalid_request");
    over.result.content[0]!.text = over.result.content[0]!.text.slice(1);
    expect(JSON.stringify(over).length).toBe(cap);
    const atCap = { ...over, result: { ...over.result, structured_content: undefined } };
    expect((await call(stack.url, "POST", `/executors/${ex.id}/responses`, { token: ex.token, raw: JSON.stringify(atCap) })).status).toBe(200);
    await settled(s, input);
    const r = results(s)[0].data.result;
    expect(r).toMatchObject({ is_error: true, unknown_outcome: true });
    expect(r.content[0].text).toMatch(/structured_content/);
    ex.drop();
    s.sse.close();
  });
});

describe("rebinding after an executor restart", () => {
  it("a new registration with the session routes the binding to it; different descriptors are 409, another tool's name 400", async () => {
    const old = await register([SLOW], "jobs");
    const s = await session([{ alias: "jobs", executor: old.id }]);
    const mismatch = await registerExecutor(stack.url, env.MANAGE, { binding: "jobs", tools: [{ ...SLOW, description: "else" }], session: s.id });
    expect(mismatch.status).toBe(409);
    // Another alias: its tool would clash with the session's slow_job (400); a binding the session lacks is 409.
    expect((await registerExecutor(stack.url, env.MANAGE, { binding: "nojobs", tools: [SLOW], session: s.id })).status).toBe(400);
    expect((await registerExecutor(stack.url, env.MANAGE, { binding: "nojobs", tools: [LOOKUP], session: s.id })).status).toBe(409);
    expect((await registerExecutor(stack.url, env.MANAGE, { binding: "jobs", tools: [SLOW], session: "0".repeat(32) })).status).toBe(404);
    expect((await registerExecutor(stack.url, env.OTHER, { binding: "jobs", tools: [SLOW], session: s.id })).status).toBe(404);
    const fresh = await registerExecutor(stack.url, env.MANAGE, { binding: "jobs", tools: [SLOW], session: s.id });
    expect(fresh.status).toBe(201);
    const got = await call(stack.url, "GET", `/sessions/${s.id}`, { token: env.MANAGE });
    expect(got.body.config.bindings[0].executor).toBe(fresh.body.id);
    const ex = await rpcExecutor(stack.url, fresh.body);
    const input = await send(s, "[[tool slow_job {}]]");
    const c = await callOf(ex);
    await ex.reply({ call_id: c.call_id, result: { content: [{ type: "text", text: "from the new one" }] } });
    await settled(s, input);
    expect(results(s)[0].data.result.content[0].text).toBe("from the new one");
    ex.drop();
    s.sse.close();
  });

  it("a binding whose operations leave out a tool named like another of the session's can be rebound", async () => {
    const jobs = await register([SLOW, LOOKUP], "jobs");
    const dict = await register([LOOKUP], "dict");
    // `jobs` enables slow_job only; lookup is `dict`'s in this session.
    const s = await session([
      { alias: "jobs", executor: jobs.id, operations: [SLOW.name] },
      { alias: "dict", executor: dict.id },
    ]);
    const again = await registerExecutor(stack.url, env.MANAGE, { binding: "jobs", tools: [SLOW, LOOKUP], session: s.id });
    expect([again.status, again.body.error?.message]).toEqual([201, undefined]);
    s.sse.close();
  });
});

describe("an object restart mid-call", () => {
  it("the Worker restarts while a call is pending: the executor reconnects and the call ends with unknown_outcome; the next call works", async () => {
    const cred = await register([SLOW], "jobs");
    let ex = await sseExecutor(stack.url, cred);
    const s = await session([{ alias: "jobs", executor: cred.id }]);
    const input = await send(s, "[[tool slow_job {}]]");
    await callOf(ex);
    const mark = stack.mark();
    stack.child.kill("SIGHUP");
    await stack.waitForLog(/"msg":"worker reloaded"/, 30_000, mark);
    await ex.ended;
    ex = await sseExecutor(stack.url, cred);
    const sse = await openSse(`${stack.url}/sessions/${s.id}/events`, { token: env.MANAGE });
    await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === input, 30_000);
    const res = sse.frames.filter((f) => f.event === "tool.result");
    expect(res).toHaveLength(1);
    expect(res[0]!.json.data.result).toMatchObject({ is_error: true, unknown_outcome: true });
    const next = await send({ id: s.id, sse }, "[[tool slow_job {}]]");
    const c = await ex.waitFor((x) => x.type === "call");
    expect((await ex.reply({ call_id: (c as CallCommand).call_id, result: { content: [{ type: "text", text: "after" }] } })).status).toBe(200);
    await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === next, 30_000);
    ex.drop();
    sse.close();
    s.sse.close();
  });
});

describe("browser origins", () => {
  it("a page's WebSocket to /executors/{id}/rpc is refused while a Node client with the same token connects", async () => {
    const cred = await register();
    // The page and a control WebSocket server live on loopback too, so nothing but the Origin rule
    // can tell the two sockets apart: the control one opens, the executor one is refused.
    const { WebSocketServer } = await import("ws");
    const origins: (string | undefined)[] = [];
    const page = http.createServer((_q, res) => res.writeHead(200, { "Content-Type": "text/html" }).end("<!doctype html><title>app</title>"));
    const control = new WebSocketServer({ server: page, handleProtocols: () => "svc-rpc" });
    control.on("connection", (_ws, req) => origins.push(req.headers.origin));
    await new Promise<void>((r) => page.listen(0, "127.0.0.1", r));
    const pageUrl = `http://127.0.0.1:${(page.address() as AddressInfo).port}`;
    const browser = await launchChromium();
    try {
      const tab = await browser.newPage();
      await tab.goto(`${pageUrl}/`);
      const open = (url: string, token: string) =>
        tab.evaluate(
          ([u, t]) =>
            new Promise<string>((resolve) => {
              const ws = new WebSocket(u!, ["svc-rpc", `svc-auth.${t}`]);
              ws.onopen = () => (ws.close(), resolve("open"));
              ws.onerror = () => resolve("refused");
            }),
          [url, token],
        );
      expect(await open(pageUrl.replace("http", "ws"), cred.token)).toBe("open");
      expect(origins).toEqual([pageUrl]);
      expect(await open(`${stack.url.replace("http", "ws")}/executors/${cred.id}/rpc`, cred.token)).toBe("refused");
    } finally {
      await browser.close();
      control.close();
      page.close();
    }
    const node = await rpcExecutor(stack.url, cred);
    expect(node.connection).toMatch(/^[0-9a-f]{32}$/);
    node.drop();
  });
});
