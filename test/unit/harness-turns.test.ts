/**
 * The reference harness, spawned for real through `HarnessProcess`, against the scripted
 * OpenAI-compatible provider on loopback: the whole client path (pi-agent-core → pi-ai → OpenAI SDK
 * → HTTP/SSE) with no network and no real keys.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import type { HarnessProcess } from "../../runner-host/harness/harness-process.ts";
import { EventLog, initCommand, ok, startHarness, WEATHER_TOOL } from "./harness-helpers.ts";

let provider: ScriptedProvider;
let hp: HarnessProcess;
let sessionNo = 0;

beforeAll(async () => {
  provider = await startScriptedProvider();
  ({ hp } = await startHarness());
  await ok(hp, initCommand(provider.url));
});

afterAll(async () => {
  await hp?.kill();
  await provider?.close();
});

/** Opens a fresh session (unique id) with the weather tool and returns its event log. */
async function open(extra: { tools?: (typeof WEATHER_TOOL)[]; state?: { format: string; v: number; records: Record<string, unknown>[] } } = {}) {
  const session = `s${++sessionNo}`;
  const log = new EventLog(hp, session);
  const result = await ok(hp, { op: "open", session, model: "openai/gpt-4o-mini", tools: extra.tools ?? [WEATHER_TOOL], ...(extra.state ? { state: extra.state } : {}) });
  return { session, log, result };
}

async function run(session: string, turn: string, text: string) {
  await ok(hp, { op: "run", session, turn, text });
}

/** Requests the scripted provider received for the given user text (last user message). */
function requestsFor(marker: string) {
  return provider.requests.filter((r) => JSON.stringify(r.body?.messages ?? []).includes(marker));
}

describe("reference harness on the scripted provider", () => {
  it("starts, says ready with the protocol version, and reports the resolved model at open", async () => {
    expect(hp.ready).toMatchObject({ type: "ready", protocol: 1 });
    expect(hp.startupMs).toBeGreaterThan(0);
    const { result } = await open();
    expect(result).toEqual({
      model: { provider: "openai", id: "gpt-4o-mini", api: "openai-completions", context_window: 128000 },
      thinking_level: "off",
      records: 0,
    });
  });

  it("streams deltas, then assistant.message with usage and stop_reason, state.append, turn.end completed", async () => {
    const { session, log } = await open();
    await run(session, "t1", "[[deltas 20000 size=4]] [[usage prompt=42 cached=10 completion=7]]");
    const end = await log.next("turn.end");
    expect(end).toMatchObject({ session, turn: "t1", status: "completed" });
    const events = log.turn("t1");
    const deltas = events.filter((e) => e.type === "assistant.delta");
    // Deltas written in one event-loop turn share a line: fewer lines, the same text in order.
    expect(deltas.length).toBeGreaterThan(0);
    expect(deltas.length).toBeLessThan(20000);
    const message = events.find((e) => e.type === "assistant.message")!;
    expect(deltas.map((d) => (d.type === "assistant.delta" ? d.text : "")).join("")).toBe(message.type === "assistant.message" ? message.text : "");
    expect(message).toMatchObject({
      stop_reason: "stop",
      model: { provider: "openai", id: "gpt-4o-mini" },
      usage: { input_tokens: 32, output_tokens: 7, cache_read_tokens: 10, cache_write_tokens: 0, total_tokens: 49 },
    });
    expect(message.type === "assistant.message" && message.text.length).toBe(80000);
    // Order: deltas → assistant.message → state.append(assistant) → turn.end.
    const types = events.filter((e) => e.type !== "assistant.delta").map((e) => e.type);
    expect(types).toEqual(["state.append", "assistant.message", "state.append", "turn.end"]);
    const appends = events.flatMap((e) => (e.type === "state.append" ? e.records : []));
    expect(appends.map((r) => r.role)).toEqual(["user", "assistant"]);
  });

  it("a surrogate pair the provider splits between two chunks reaches stdout whole: no delta holds half of one", async () => {
    const { session, log } = await open();
    // Tokens 3 ms apart: each delta is a line of its own (adjacent ones in one read share a line).
    await run(session, "t1", "[[units 1]] [[delay 3]] a😀b😀");
    await log.next("turn.end");
    const events = log.turn("t1");
    const deltas = events.flatMap((e) => (e.type === "assistant.delta" ? [e.text] : []));
    expect(deltas.every((d) => d.isWellFormed())).toBe(true);
    const message = events.find((e) => e.type === "assistant.message");
    expect(deltas.join("")).toBe("echo: a😀b😀");
    expect(message).toMatchObject({ text: "echo: a😀b😀" });
  });

  it("runs concurrent turns of two sessions in one process", async () => {
    const a = await open();
    const b = await open();
    await Promise.all([run(a.session, "ta", "[[delay 2]] alpha one two three"), run(b.session, "tb", "[[delay 2]] beta four five six")]);
    const [endA, endB] = await Promise.all([a.log.next("turn.end"), b.log.next("turn.end")]);
    expect([endA.status, endB.status]).toEqual(["completed", "completed"]);
    const textOf = (log: EventLog) => log.events.find((e) => e.type === "assistant.message")!;
    expect(textOf(a.log)).toMatchObject({ text: "echo: alpha one two three" });
    expect(textOf(b.log)).toMatchObject({ text: "echo: beta four five six" });
    expect(await ok(hp, { op: "ping" })).toMatchObject({ running: 0 });
  });

  it("delegates a tool call and sends the result back to the provider", async () => {
    const { session, log } = await open();
    await run(session, "t1", 'tooltrip [[tool get_weather {"city":"Paris"}]]');
    const call = await log.next("tool.call");
    expect(call.call).toMatchObject({ name: "get_weather", arguments: { city: "Paris" } });
    const first = requestsFor("tooltrip")[0]!;
    // The provider saw the real JSON Schema, not pi's accept-all one.
    expect(first.body.tools[0].function.parameters).toEqual(WEATHER_TOOL.input_schema);
    await ok(hp, { op: "tool_result", session, call_id: call.call.id, result: { content: [{ type: "text", text: '{"temp_c":21}' }] } });
    const end = await log.next("turn.end");
    expect(end.status).toBe("completed");
    const messages = log.turn("t1").filter((e) => e.type === "assistant.message");
    expect(messages.map((m) => m.type === "assistant.message" && m.stop_reason)).toEqual(["tool_use", "stop"]);
    expect(messages[1]).toMatchObject({ text: 'tool get_weather returned: {"temp_c":21}' });
    const second = requestsFor("tooltrip")[1]!;
    expect(second.body.messages.at(-1)).toMatchObject({ role: "tool", tool_call_id: call.call.id, content: '{"temp_c":21}' });
    // A second answer for the same call is stale.
    const stale = await hp.request({ op: "tool_result", session, call_id: call.call.id, result: { content: [] } });
    expect(stale).toMatchObject({ ok: false, error: { code: "unknown_call" } });
  });

  it.each([
    ["left empty", 0],
    ["longer than the protocol carries", 5000],
  ])("a tool call id the provider %s is replaced by one of the harness's own, which the provider then gets back", async (_what, chars) => {
    const { session, log } = await open();
    await run(session, "t1", `oddid${chars} [[call-id-chars ${chars}]] [[tool get_weather {"city":"Rome"}]]`);
    const call = await log.next("tool.call");
    expect(call.call.id).toMatch(/^call_svc[0-9a-f]{24}$/);
    await ok(hp, { op: "tool_result", session, call_id: call.call.id, result: { content: [{ type: "text", text: "sunny" }] } });
    expect(await log.next("turn.end")).toMatchObject({ status: "completed" });
    const messages = requestsFor(`oddid${chars}`)[1]!.body.messages;
    expect(messages.at(-2).tool_calls.map((c: { id: string }) => c.id)).toEqual([call.call.id]);
    expect(messages.at(-1)).toMatchObject({ role: "tool", tool_call_id: call.call.id, content: "sunny" });
  });

  it("two calls of one reply with the same (empty) provider id each get an id, a result, and the turn ends", async () => {
    const { session, log } = await open();
    await run(session, "t1", 'twinids [[call-id-chars 0]] [[tool get_weather {"city":"a"}]] [[tool get_weather {"city":"b"}]]');
    const first = await log.next("tool.call");
    const second = await log.next("tool.call");
    expect(new Set([first.call.id, second.call.id]).size).toBe(2);
    for (const c of [first, second]) await ok(hp, { op: "tool_result", session, call_id: c.call.id, result: { content: [{ type: "text", text: `for ${c.call.arguments.city}` }] } });
    expect(await log.next("turn.end")).toMatchObject({ status: "completed" });
    const tools = requestsFor("twinids")[1]!.body.messages.filter((m: { role: string }) => m.role === "tool");
    expect(tools.map((m: { tool_call_id: string }) => m.tool_call_id).sort()).toEqual([first.call.id, second.call.id].sort());
  });

  it("a reply too large for one protocol line fails only its own turn (service_error); the process and another session carry on", async () => {
    const [big, huge, other] = [await open(), await open(), await open()];
    // 9.3 MiB in 1 KiB deltas, and 9 MiB as one delta: the assistant.message line alone is over 8 MiB.
    await run(big.session, "tb", "[[deltas 9300 size=1024]]");
    await run(huge.session, "th", `[[deltas 1 size=${9 * 1024 * 1024}]]`);
    await run(other.session, "to", "[[delay 5]] still here");
    for (const log of [big.log, huge.log]) {
      const end = await log.next("turn.end");
      expect(end).toMatchObject({ status: "failed", error: { code: "service_error" } });
      expect(end.error!.message).toMatch(/^the model's output made an? [a-z.]+ line of \d+ bytes, over the 8388608-byte line limit of the harness protocol$/);
      const deltas = log.events.filter((e) => e.type === "assistant.delta");
      expect(deltas.every((d) => d.type === "assistant.delta" && d.text.length <= 256 * 1024)).toBe(true);
    }
    expect(await other.log.next("turn.end")).toMatchObject({ status: "completed" });
    expect(hp.exitInfo).toBeUndefined();
    expect(await ok(hp, { op: "ping" })).toMatchObject({ running: 0 });
  });

  it("answers a call to an unknown tool with a synthetic tool.call + error tool.result and continues", async () => {
    const { session, log } = await open();
    await run(session, "t1", "[[tool launch_rockets {\"count\":3}]]");
    const call = await log.next("tool.call");
    expect(call.call).toMatchObject({ name: "launch_rockets", arguments: { count: 3 } });
    const result = await log.next("tool.result");
    expect(result).toMatchObject({ call_id: call.call.id, result: { is_error: true, content: [{ type: "text", text: "Tool launch_rockets not found" }] } });
    expect((await log.next("turn.end")).status).toBe("completed");
    expect(log.events.filter((e) => e.type === "assistant.message").at(-1)).toMatchObject({ text: "tool launch_rockets returned: Tool launch_rockets not found" });
  });

  it("refuses, without dispatching, a call whose arguments nest deeper than 64 levels, recording them as {}; 64 levels are dispatched; 5,000 do not end the process", async () => {
    // The arguments object is level 1: `{"city":"x","d":{"a":…}}`.
    const args = (levels: number) => `{"city":"x","d":${'{"a":'.repeat(levels - 1)}1${"}".repeat(levels - 1)}}`;
    const fits = await open();
    await run(fits.session, "t1", `deep64 [[tool get_weather ${args(64)}]]`);
    const dispatched = await fits.log.next("tool.call");
    expect(dispatched.answered).toBeUndefined();
    expect(JSON.stringify(dispatched.call.arguments)).toBe(args(64));
    await ok(hp, { op: "tool_result", session: fits.session, call_id: dispatched.call.id, result: { content: [{ type: "text", text: "ok" }] } });
    expect((await fits.log.next("turn.end")).status).toBe("completed");
    for (const levels of [65, 5_000]) {
      const { session, log } = await open();
      await run(session, "t1", `deep${levels} [[tool get_weather ${args(levels)}]]`);
      const call = await log.next("tool.call");
      expect(call).toMatchObject({ answered: true, call: { name: "get_weather", arguments: {} } });
      expect(await log.next("tool.result")).toMatchObject({
        call_id: call.call.id,
        result: { is_error: true, content: [{ type: "text", text: 'the arguments of this call to "get_weather" nest deeper than 64 levels; it was not run' }] },
      });
      expect((await log.next("turn.end")).status).toBe("completed");
      // The native record of the reply holds the call with `{}`, not the model's arguments.
      const records = log.turn("t1").flatMap((e) => (e.type === "state.append" ? e.records : []));
      expect(JSON.stringify(records)).not.toContain('{"a":{"a":');
    }
    expect(hp.exitInfo).toBeUndefined();
  });

  it("refuses, without dispatching, a call whose arguments are no whole JSON object: cut off, no JSON, not an object", async () => {
    for (const args of ['{"city":"Pa', "{bad json}", "5", '"Paris"', "[1,2]", "null"]) {
      const { session, log } = await open();
      await run(session, "t1", `refuse [[tool get_weather ${args}]]`);
      const call = await log.next("tool.call");
      expect(call, "the harness answers it: the service must not run it").toMatchObject({ answered: true });
      const result = await log.next("tool.result");
      expect(result, args).toMatchObject({
        call_id: call.call.id,
        result: { is_error: true, content: [{ type: "text", text: expect.stringMatching(/^the arguments of this call to "get_weather" are not (complete JSON|a JSON object).*; it was not run$/) }] },
      });
      // Answered by the harness itself: a tool_result from the service now finds no pending call.
      const late = await hp.request({ op: "tool_result", session, call_id: call.call.id, result: { content: [] } });
      expect(late).toMatchObject({ ok: false, error: { code: "unknown_call" } });
      expect((await log.next("turn.end")).status).toBe("completed");
    }
    // What pi repairs in a string literal (a raw control character) is still a whole object: dispatched.
    const { session, log } = await open();
    await run(session, "t1", 'repair [[tool get_weather {"city":"Pa\tris"}]]');
    const call = await log.next("tool.call");
    expect(call.call.arguments).toEqual({ city: "Pa\tris" });
    await ok(hp, { op: "tool_result", session, call_id: call.call.id, result: { content: [{ type: "text", text: "ok" }] } });
    expect((await log.next("turn.end")).status).toBe("completed");
  });

  it("interrupts a hanging stream: turn.end interrupted", async () => {
    const { session, log } = await open();
    const before = provider.requests.length;
    await run(session, "t1", "[[hang]] hangstream");
    await provider.waitForRequests(before + 1);
    await ok(hp, { op: "interrupt", session });
    const end = await log.next("turn.end");
    expect(end).toMatchObject({ status: "interrupted", error: { code: "conflict" } });
    expect(log.turn("t1").find((e) => e.type === "assistant.message")).toMatchObject({ stop_reason: "aborted" });
  });

  it("interrupts a pending tool wait without another provider request or an empty assistant.message", async () => {
    const { session, log } = await open();
    await run(session, "t1", 'toolwait [[tool get_weather {"city":"Oslo"}]]');
    const call = await log.next("tool.call");
    await ok(hp, { op: "interrupt", session });
    expect(await log.next("turn.end")).toMatchObject({ status: "interrupted" });
    expect(requestsFor("toolwait")).toHaveLength(1);
    const messages = log.turn("t1").filter((e) => e.type === "assistant.message");
    expect(messages.map((m) => m.type === "assistant.message" && m.stop_reason)).toEqual(["tool_use"]);
    // The empty aborted message is still native state: user, assistant, toolResult, assistant.
    const roles = log.turn("t1").flatMap((e) => (e.type === "state.append" ? e.records.map((r) => r.role) : []));
    expect(roles).toEqual(["user", "assistant", "toolResult", "assistant"]);
    const late = await hp.request({ op: "tool_result", session, call_id: call.call.id, result: { content: [] } });
    expect(late).toMatchObject({ ok: false, error: { code: "unknown_call" } });
  });

  it.each([
    ["[[error 500 upstream exploded]] boom500", "500 upstream exploded"],
    ["[[error 401]] boom401", "401 Incorrect API key provided"],
  ])("turns %j into turn.end failed provider_error with pi's message, without retries", async (text, message) => {
    const { session, log } = await open();
    await run(session, "t1", text);
    const end = await log.next("turn.end");
    expect(end).toMatchObject({ status: "failed", error: { code: "provider_error", message } });
    expect(log.turn("t1").find((e) => e.type === "assistant.message")).toMatchObject({ stop_reason: "error", error: message });
    expect(requestsFor(text.split(" ").at(-1)!)).toHaveLength(1);
  });

  it.each([
    ["[[deltas 3]] [[cut]] cutbare", "the provider's stream ended before the reply finished (no finish_reason)"],
    ["[[deltas 3]] [[cut done]] cutdone", "the provider's stream ended before the reply finished (no finish_reason)"],
    ["[[json]] wholejson", 'the provider answered 200 with "application/json", not an event stream'],
  ])("turns %j (a reply that did not finish) into turn.end failed provider_error, not a completed reply", async (text, message) => {
    const { session, log } = await open();
    await run(session, "t1", text);
    expect(await log.next("turn.end")).toMatchObject({ status: "failed", error: { code: "provider_error", message } });
    expect(log.turn("t1").find((e) => e.type === "assistant.message")).toMatchObject({ stop_reason: "error", error: message });
  });

  it("sends instructions as the system prompt, else the generic default", async () => {
    const plain = await open();
    await run(plain.session, "t1", "sysprompt-default");
    await plain.log.next("turn.end");
    expect(requestsFor("sysprompt-default")[0]!.body.messages[0]).toMatchObject({ role: "system", content: "You are a helpful assistant." });
    const session = `s${++sessionNo}`;
    const log = new EventLog(hp, session);
    await ok(hp, { op: "open", session, model: "openai/gpt-4o-mini", instructions: "Answer like a pirate.", tools: [] });
    await run(session, "t1", "sysprompt-custom [[finish length]]");
    await log.next("turn.end");
    const sent = requestsFor("sysprompt-custom")[0]!.body;
    expect(sent.messages[0]).toMatchObject({ role: "system", content: "Answer like a pirate." });
    expect(sent.tools).toBeUndefined();
    expect(log.events.find((e) => e.type === "assistant.message")).toMatchObject({ stop_reason: "length" });
  });

  it("rejects a model that is not in the offline catalog with model_unavailable", async () => {
    const res = await hp.request({ op: "open", session: "missing-model", model: "openai/gpt-404", tools: [] });
    expect(res).toMatchObject({ ok: false, error: { code: "model_unavailable" } });
  });

  it("rejects unsupported efforts with effort_unsupported, never clamping", async () => {
    const high = await hp.request({ op: "open", session: "e1", model: "openai/gpt-4o-mini", reasoning_effort: "high", tools: [] });
    expect(high).toMatchObject({ ok: false, error: { code: "effort_unsupported" } });
    expect(!high.ok && high.error.message).toContain("unsupported");
    const off = await hp.request({ op: "open", session: "e2", model: "openai/gpt-5", tools: [] });
    expect(off).toMatchObject({ ok: false, error: { code: "effort_unsupported" } });
    expect(!off.ok && off.error.message).toMatch(/"off" is unsupported.*minimal, low, medium, high/);
    const fine = await hp.request({ op: "open", session: "e3", model: "openai/gpt-5", reasoning_effort: "low", tools: [] });
    expect(fine).toMatchObject({ ok: true, result: { thinking_level: "low" } });
  });

  it("exports, detaches and re-opens from state records; the next request carries the whole conversation", async () => {
    const { session, log } = await open();
    await run(session, "t1", "first remember-me");
    await log.next("turn.end");
    const appended = log.events.flatMap((e) => (e.type === "state.append" ? e.records : []));
    const exported = await ok(hp, { op: "export", session });
    expect(exported.state).toEqual({ format: "pi-agent-core.messages", v: 1, records: appended });
    await ok(hp, { op: "detach", session });
    expect(await hp.request({ op: "export", session })).toMatchObject({ ok: false, error: { code: "unknown_session" } });

    const reopened = await open({ state: exported.state });
    expect(reopened.result.records).toBe(2);
    await run(reopened.session, "t2", "second reopened-turn");
    expect((await reopened.log.next("turn.end")).status).toBe("completed");
    const last = requestsFor("reopened-turn").at(-1)!;
    const convo = last.body.messages.filter((m: { role: string }) => m.role !== "system" && m.role !== "developer");
    expect(convo.map((m: { role: string }) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(JSON.stringify(convo[0])).toContain("first remember-me");
    expect(JSON.stringify(convo[1])).toContain("echo: first remember-me");
  });

  it("uses the key from set_keys for the next request", async () => {
    const { session, log } = await open();
    await run(session, "t1", "keycheck-one");
    await log.next("turn.end");
    expect(requestsFor("keycheck-one")[0]!.headers.authorization).toBe("Bearer test-key-1");
    await ok(hp, { op: "set_keys", providers: { openai: { key: "test-key-2" } } });
    await run(session, "t2", "keycheck-two");
    await log.next("turn.end");
    expect(requestsFor("keycheck-two")[0]!.headers.authorization).toBe("Bearer test-key-2");
    await ok(hp, { op: "set_keys", providers: { openai: { key: "test-key-1" } } });
  });

  it("answers conflict for run, export and detach while a turn is running", async () => {
    const { session, log } = await open();
    await run(session, "t1", "[[hang]] conflict-check");
    expect(await hp.request({ op: "run", session, turn: "t2", text: "again" })).toMatchObject({ ok: false, error: { code: "conflict" } });
    expect(await hp.request({ op: "export", session })).toMatchObject({ ok: false, error: { code: "conflict" } });
    expect(await hp.request({ op: "detach", session })).toMatchObject({ ok: false, error: { code: "conflict" } });
    await ok(hp, { op: "interrupt", session });
    await log.next("turn.end");
  });
});

describe("reasoning effort the model's transport would not send", () => {
  let own: HarnessProcess;

  beforeAll(async () => {
    ({ hp: own } = await startHarness());
    const transport = { key: "test-key-1", base_url: provider.url, api: "openai-completions" as const };
    await ok(own, { op: "init", protocol: 1, providers: { openai: transport, xai: transport } });
  });

  afterAll(async () => {
    await own?.kill();
  });

  async function turn(session: string, model: string, effort: "high" | "low" | undefined, marker: string) {
    const log = new EventLog(own, session);
    await ok(own, { op: "open", session, model, tools: [], ...(effort ? { reasoning_effort: effort } : {}) });
    await ok(own, { op: "run", session, turn: "t1", text: marker });
    return log.next("turn.end");
  }

  it("fails the turn as unsupported, never sending the request without it (a silent downgrade)", async () => {
    // pi lists every level for xAI's grok-3-mini, and its transport sends none of them.
    const end = await turn("x-high", "xai/grok-3-mini", "high", "effort-dropped-high");
    expect(end).toMatchObject({ status: "failed", error: { code: "service_error", message: 'reasoning effort "high" is unsupported by model xai/grok-3-mini; supported: off' } });
    expect(requestsFor("effort-dropped-high")).toHaveLength(0);
    expect((await turn("x-off", "xai/grok-3-mini", undefined, "effort-dropped-off")).status).toBe("completed");
  });

  it("lets an effort that reaches the provider through, on every request of the session", async () => {
    expect((await turn("g-low", "openai/gpt-5", "low", "effort-sent-low")).status).toBe("completed");
    expect(requestsFor("effort-sent-low").map((r) => r.body.reasoning_effort)).toEqual(["low"]);
  });
});
