/**
 * Turns run for real: the local stack, the runner-host, the reference harness on pi-agent-core and
 * the scripted OpenAI-compatible provider on loopback. Every way a turn ends (docs/api.md "Turns"),
 * resume, and the harness environment.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call, expectApiError } from "../helpers/api.ts";
import { openSse, type Frame, type SseStream } from "../helpers/sse.ts";
import { REFERENCE_HARNESSES, ROOT, secret, type Stack, startScriptedStack, type ScriptedStack } from "../helpers/stack.ts";

const env = { MANAGE: secret("turn-manage"), OPENAI_KEY: "sk-turns-key-1", HOST_SECRET_THING: "must-not-leak" };
let rig: ScriptedStack;
let provider: ScriptedProvider;
let stack: Stack;

beforeAll(async () => {
  rig = await startScriptedStack({
    config: {
      tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
      harnesses: {
        pi: REFERENCE_HARNESSES.pi,
        env: { command: ["node", `${ROOT}test/fixtures/env-harness.mjs`] },
      },
    },
    env,
  });
  ({ provider, stack } = rig);
});
afterAll(() => rig?.stop());

type Session = { id: string; sse: SseStream };

async function session(config: Record<string, unknown> = {}, harness = "pi"): Promise<Session> {
  const r = await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness, config: { model: "openai/gpt-4o-mini", tools: [], ...config } } });
  expect(r.status).toBe(201);
  return { id: r.body.id, sse: await openSse(`${stack.url}/sessions/${r.body.id}/events`, { token: env.MANAGE }) };
}
const say = async (s: Session, text: string) => {
  const r = await call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: { type: "user.message", text } });
  expect(r.status).toBe(202);
  return r.body as { id: string };
};
const status = (s: Session, st: string, inputId?: string) =>
  s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === st && (inputId === undefined || f.json.input_id === inputId));
/** Resolves once the provider received a request mentioning `marker`. */
async function reached(marker: string): Promise<void> {
  const asked = () => provider.requests.some((r) => JSON.stringify(r.body).includes(marker));
  for (let n = 1; !asked(); n++) await provider.waitForRequests(n, 20_000);
}
const summary = (frames: Frame[]) =>
  frames.filter((f) => f.event !== "assistant.delta").map((f) => (f.event === "session.status" ? `status:${f.json.data.status}` : f.event === "session.error" ? `error:${f.json.data.code}` : f.event!));

describe("turns", () => {
  it("idle → running → idle: deltas live only, assistant.message with usage and stop_reason, a checkpoint", async () => {
    const s = await session();
    const m = await say(s, "hello world");
    await status(s, "idle", m.id);
    expect(summary(s.sse.frames)).toEqual(["user.message", "status:running", "assistant.message", "status:idle"]);
    const running = s.sse.frames[1]!;
    expect(running.json.input_id).toBe(m.id);
    const deltas = s.sse.frames.filter((f) => f.event === "assistant.delta");
    expect(deltas.length).toBeGreaterThan(0);
    for (const d of deltas) {
      expect(d.id).toBeUndefined();
      expect(d.json.cursor).toBeUndefined();
      expect(d.json.input_id).toBe(m.id);
    }
    expect(deltas.map((d) => d.json.data.text).join("")).toBe("echo: hello world");
    const msg = s.sse.frames.find((f) => f.event === "assistant.message")!.json;
    expect(msg.input_id).toBe(m.id);
    expect(msg.data).toEqual({
      text: "echo: hello world",
      usage: { input_tokens: expect.any(Number), output_tokens: expect.any(Number), cache_read_tokens: 0, cache_write_tokens: 0, total_tokens: expect.any(Number) },
      stop_reason: "stop",
    });
    // Retained events only in the log.
    const log = (await call(stack.url, "GET", `/sessions/${s.id}/events`, { token: env.MANAGE })).body.events;
    expect(log.map((e: { type: string }) => e.type)).toEqual(["user.message", "session.status", "assistant.message", "session.status"]);
    const got = (await call(stack.url, "GET", `/sessions/${s.id}`, { token: env.MANAGE })).body;
    expect(got.status).toBe("idle");
    expect(got.checkpoint).toMatchObject({ id: expect.stringMatching(/^[0-9a-f]{32}$/), offset: expect.any(Number), time: expect.any(String) });
    // The provider saw the key over the real client path, and the default system prompt.
    const req = provider.requests.find((r) => JSON.stringify(r.body).includes("hello world"))!;
    expect(req.headers.authorization).toBe(`Bearer ${env.OPENAI_KEY}`);
    expect((req.body as any).messages[0].role).toMatch(/system|developer/);
    s.sse.close();
  });

  it("queued messages run in order, with one running status and one idle at the end", async () => {
    const s = await session({ instructions: "You are terse." });
    // The first turn is held at the provider until the other two are queued behind it.
    const a = await say(s, "first [[hold queued-in-order]]");
    await reached("queued-in-order");
    const b = await say(s, "second");
    const c = await say(s, "third");
    provider.release("queued-in-order");
    await status(s, "idle", c.id);
    const msgs = s.sse.frames.filter((f) => f.event === "assistant.message").map((f) => [f.json.input_id, f.json.data.text]);
    expect(msgs).toEqual([[a.id, "echo: first"], [b.id, "echo: second"], [c.id, "echo: third"]]);
    expect(s.sse.frames.filter((f) => f.event === "session.status").map((f) => f.json.data.status)).toEqual(["running", "idle"]);
    const sys = provider.requests.find((r) => JSON.stringify(r.body).includes("second"))!;
    expect(JSON.stringify((sys.body as any).messages[0])).toContain("You are terse.");
    s.sse.close();
  });

  it("a provider failure gives session.error provider_error, then interrupted; resume → idle", async () => {
    const s = await session();
    const mark = stack.mark();
    // The provider holds its failure until the second message is queued behind the running turn.
    const m = await say(s, "[[hold provider-failure]] [[error 500 upstream exploded]]");
    await reached("provider-failure");
    const queued = await say(s, "after");
    provider.release("provider-failure");
    await status(s, "interrupted");
    expect(summary(s.sse.frames).slice(-3)).toEqual(["error:provider_error", "error:conflict", "status:interrupted"]);
    const [err, cancelled] = s.sse.frames.filter((f) => f.event === "session.error").map((f) => f.json);
    expect(err.input_id).toBe(m.id);
    expect(err.data.message).toMatch(/500/);
    expect(cancelled.input_id).toBe(queued.id);
    // The runner-host's log says what the events say.
    const ended = JSON.parse(await stack.waitForLog(/"msg":"turn ended"/, 10_000, mark));
    expect(ended).toMatchObject({ session_id: s.id, status: "interrupted", code: "provider_error" });
    expectApiError(await call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "x" } }), 409, "conflict");
    const r = await call(stack.url, "POST", `/sessions/${s.id}/resume`, { token: env.MANAGE, body: {} });
    expect(r.body.status).toBe("idle");
    const n = await say(s, "again");
    await status(s, "idle", n.id);
    s.sse.close();
  });

  it("user.interrupt while streaming stops the turn: conflict, then interrupted", async () => {
    const s = await session();
    const m = await say(s, "[[hang]]");
    await status(s, "running", m.id);
    const r = await call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: { type: "user.interrupt" } });
    expect(r.body).toEqual({ status: "interrupt_requested" });
    await status(s, "interrupted");
    const err = s.sse.frames.find((f) => f.event === "session.error")!.json;
    expect(err).toMatchObject({ input_id: m.id, data: { code: "conflict" } });
    s.sse.close();
  });

  it("close during a turn: conflict, then closed, and the stream ends", async () => {
    const s = await session();
    const m = await say(s, "[[hang]]");
    await status(s, "running", m.id);
    expect((await call(stack.url, "POST", `/sessions/${s.id}/close`, { token: env.MANAGE })).status).toBe(202);
    await s.sse.ended;
    expect(summary(s.sse.frames).slice(-2)).toEqual(["error:conflict", "status:closed"]);
  });

  it("a model missing from the offline catalog fails the turn with service_error → failed", async () => {
    const s = await session({ model: "openai/no-such-model" });
    const m = await say(s, "hi");
    await status(s, "failed");
    // running → failed, as every turn: it begins, then fails.
    expect(summary(s.sse.frames)).toEqual(["user.message", "status:running", "error:service_error", "status:failed"]);
    const err = s.sse.frames.find((f) => f.event === "session.error")!.json;
    expect(err).toMatchObject({ input_id: m.id, data: { code: "service_error" } });
    expect(err.data.message).toMatch(/no-such-model/);
    s.sse.close();
  });

  it("an unsupported reasoning effort fails the turn with a message saying it is unsupported", async () => {
    const s = await session({ reasoning_effort: "high" });
    await say(s, "hi");
    await status(s, "failed");
    expect(summary(s.sse.frames)).toEqual(["user.message", "status:running", "error:service_error", "status:failed"]);
    const err = s.sse.frames.find((f) => f.event === "session.error")!.json;
    expect(err.data.code).toBe("service_error");
    expect(err.data.message).toMatch(/unsupported/);
    s.sse.close();
  });

  it("a local write failure (an assistant message over the 4 MiB record cap) fails the turn with service_error", async () => {
    const s = await session();
    // 5 MB of deltas in a burst may overrun this stream's budget: read the outcome from the log.
    s.sse.close();
    const mark = stack.mark();
    const m = await say(s, "[[deltas 5000 size=1000]]");
    await stack.waitForLog(/"msg":"could not record a runner message"/, 30_000, mark);
    const events = (await call(stack.url, "GET", `/sessions/${s.id}/events`, { token: env.MANAGE })).body.events;
    expect(events.map((e: { type: string; data: { status?: string; code?: string } }) => `${e.type}:${e.data.status ?? e.data.code ?? ""}`)).toEqual([
      "user.message:",
      "session.status:running",
      "session.error:service_error",
      "session.status:failed",
    ]);
    expect(events[2]).toMatchObject({ input_id: m.id });
    expect(events[2].data.message).toMatch(/local write failure/);
    s.sse = await openSse(`${stack.url}/sessions/${s.id}/events?after=${events.at(-1).cursor}`, { token: env.MANAGE });
    // Resume and the session works again.
    await call(stack.url, "POST", `/sessions/${s.id}/resume`, { token: env.MANAGE });
    const n = await say(s, "small again");
    await status(s, "idle", n.id);
    s.sse.close();
  });

  it("a tool call with no enabled tool behind it gets an error result and the turn goes on", async () => {
    const s = await session();
    const m = await say(s, '[[tool lookup {"q":"x"}]]');
    await status(s, "idle", m.id);
    const callEv = s.sse.frames.find((f) => f.event === "tool.call")!.json;
    const result = s.sse.frames.find((f) => f.event === "tool.result")!.json;
    expect(callEv.data).toMatchObject({ id: callEv.id, name: "lookup", arguments: { q: "x" } });
    expect(result.data.call_id).toBe(callEv.id);
    expect(result.data.result.is_error).toBe(true);
    expect(result.data.result.unknown_outcome).toBeUndefined();
    expect(summary(s.sse.frames)).toEqual(["user.message", "status:running", "assistant.message", "tool.call", "tool.result", "assistant.message", "status:idle"]);
    s.sse.close();
  });

  it("resume restores the last completed checkpoint: the next request holds exactly the conversation up to it", async () => {
    const s = await session();
    const first = await say(s, "one");
    await status(s, "idle", first.id);
    await say(s, "two [[error 500]]");
    await status(s, "interrupted");
    await call(stack.url, "POST", `/sessions/${s.id}/resume`, { token: env.MANAGE });
    const third = await say(s, "three");
    await status(s, "idle", third.id);
    const req = provider.requests.filter((r) => JSON.stringify(r.body).includes("three")).at(-1)!;
    const convo = (req.body as any).messages.filter((x: { role: string }) => x.role !== "system" && x.role !== "developer").map((x: { role: string; content: unknown }) => [x.role, typeof x.content === "string" ? x.content : JSON.stringify(x.content)]);
    expect(convo).toEqual([["user", expect.stringContaining("one")], ["assistant", "echo: one"], ["user", expect.stringContaining("three")]]);
    s.sse.close();
  });

  it("idle sessions make no model calls", async () => {
    const s = await session();
    const m = await say(s, "only once");
    await status(s, "idle", m.id);
    const before = provider.requests.filter((r) => JSON.stringify(r.body).includes("only once")).length;
    // Another session's whole turn is a clock that needs no sleep.
    const other = await session();
    const o = await say(other, "tick");
    await status(other, "idle", o.id);
    expect(provider.requests.filter((r) => JSON.stringify(r.body).includes("only once")).length).toBe(before);
    expect(before).toBe(1);
    s.sse.close();
    other.sse.close();
  });
});

describe("harness environment", () => {
  it("a harness gets a stripped environment: no host variables, no keys, a private home and working directory", async () => {
    const s = await session({}, "env");
    await say(s, "env please");
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status !== "running");
    expect(s.sse.frames.find((f) => f.event === "session.error")?.json.data).toBeUndefined();
    const reported = JSON.parse(s.sse.frames.find((f) => f.event === "assistant.message")!.json.data.text);
    expect(Object.keys(reported.env).sort()).toEqual(["HOME", "LANG", "PATH", "TMPDIR"]);
    const all = JSON.stringify(reported);
    expect(all).not.toContain(env.OPENAI_KEY);
    expect(all).not.toContain(env.HOST_SECRET_THING);
    expect(all).not.toContain(env.MANAGE);
    expect(reported.cwd).not.toBe(stack.dir);
    expect(reported.env.HOME).not.toBe(stack.dir);
    s.sse.close();
  });

  it("a turn that ends in the same read as its run response is over, not interrupted", async () => {
    const s = await session({}, "env");
    for (const text of ["one", "two"]) {
      const m = await say(s, text);
      await status(s, "idle", m.id);
    }
    const last = JSON.parse(s.sse.frames.filter((f) => f.event === "assistant.message").at(-1)!.json.data.text);
    expect(last.ops).not.toContain("interrupt");
    expect(last.ops.filter((op: string) => op === "run")).toHaveLength(2);
    s.sse.close();
  });
});
