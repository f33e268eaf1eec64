/**
 * The data path end to end: event log, cursors, JSON pages, SSE replay + live, subscriber budgets,
 * send input, and crash safety — on the real local stack with a real SSE client.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, expectApiError } from "../helpers/api.ts";
import { openSse, type Frame } from "../helpers/sse.ts";
import { REFERENCE_HARNESS_COMMAND, secret, startScriptedStack, startStack, type Stack } from "../helpers/stack.ts";

const env = { MANAGE: secret("ev-manage"), READ: secret("ev-read"), WRITE: secret("ev-write"), KEY: "sk-x" };
const MiB = 1024 * 1024;

function config(limits: Record<string, number>) {
  return {
    tokens: [
      { token_env: "MANAGE", tenant: "t1", manage: true },
      { token_env: "READ", tenant: "t1", read_only: true },
      { token_env: "WRITE", tenant: "t1" },
    ],
    harnesses: { pi: { command: REFERENCE_HARNESS_COMMAND } },
    providers: { openai: { api_key_env: "KEY" } },
    limits,
  };
}

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    config: config({ input_bytes: MiB, queue: 64, subscribers: 32, subscriber_events: 64, subscriber_bytes: 8 * MiB }),
    env,
    runner: false,
  });
});
afterAll(async () => {
  await stack?.stop();
});

async function newSession(s = stack): Promise<string> {
  const r = await call(s.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } });
  expect(r.status).toBe(201);
  return r.body.id;
}
const send = (id: string, body: unknown, s = stack, token = env.WRITE) => call(s.url, "POST", `/sessions/${id}/events`, { token, body });
const page = (id: string, q = "", s = stack) => call(s.url, "GET", `/sessions/${id}/events${q}`, { token: env.READ });
/** Every retained event, following next_cursor (a page of large records stops early). */
async function allEvents(id: string, s = stack): Promise<any[]> {
  const out: any[] = [];
  let after = "";
  for (;;) {
    const p = (await page(id, `?limit=1000&after=${after}`, s)).body;
    if (p.events.length === 0) return out;
    out.push(...p.events);
    after = p.next_cursor;
  }
}

describe("send input", () => {
  it("user.message returns 202 with the recorded event, queued for its turn", async () => {
    const id = await newSession();
    const r = await send(id, { type: "user.message", text: "hello", delivery: "queue", key: "k1" });
    expect(r.status).toBe(202);
    const e = r.body;
    expect(Object.keys(e).sort()).toEqual(["cursor", "data", "id", "time", "type"]);
    expect(e.id).toMatch(/^[0-9a-f]{32}$/);
    expect(e.type).toBe("user.message");
    expect(e.data).toEqual({ type: "user.message", text: "hello", delivery: "queue", key: "k1" });
    expect(new Date(e.time).toISOString()).toBe(e.time);
    const plain = await send(id, { type: "user.message", text: "no key" });
    expect(plain.body.data).toEqual({ type: "user.message", text: "no key", delivery: "queue" });
    expect(await allEvents(id)).toEqual([e, plain.body]);
    // No turn ran: nothing but the two messages, and the session is still idle.
    expect((await call(stack.url, "GET", `/sessions/${id}`, { token: env.READ })).body.status).toBe("idle");
  });

  it("a repeated key with the same input returns the original event and queues nothing", async () => {
    const id = await newSession();
    const first = await send(id, { type: "user.message", text: "once", key: "same" });
    const again = await send(id, { type: "user.message", text: "once", key: "same", delivery: "queue" });
    expect(again.status).toBe(202);
    expect(again.body).toEqual(first.body);
    expect(await allEvents(id)).toHaveLength(1);
    expectApiError(await send(id, { type: "user.message", text: "other", key: "same" }), 409, "conflict");
  });

  it("delivery steer gives 422 unsupported; other values and missing text give 400", async () => {
    const id = await newSession();
    expectApiError(await send(id, { type: "user.message", text: "x", delivery: "steer" }), 422, "unsupported");
    expectApiError(await send(id, { type: "user.message", text: "x", delivery: "later" }), 400, "invalid_request");
    expectApiError(await send(id, { type: "user.message" }), 400, "invalid_request");
    expectApiError(await send(id, { type: "user.note", text: "x" }), 400, "invalid_request");
    expectApiError(await send(id, { type: "user.message", text: "x", extra: true }), 400, "invalid_request");
    expectApiError(await send(id, { type: "user.interrupt", text: "x" }), 400, "invalid_request");
    expect(await allEvents(id)).toHaveLength(0);
  });

  it("text over input_bytes gives 400; a body over the cap gives 413", async () => {
    const id = await newSession();
    const at = "é".repeat(MiB / 2);
    expect((await send(id, { type: "user.message", text: at })).status).toBe(202);
    expectApiError(await send(id, { type: "user.message", text: `${at}x` }), 400, "invalid_request");
    expectApiError(await send(id, { type: "user.message", text: "x".repeat(MiB + 16384) }), 413, "invalid_request");
  });

  it("a read-only token cannot send: 403", async () => {
    const id = await newSession();
    expectApiError(await send(id, { type: "user.message", text: "x" }, stack, env.READ), 403, "forbidden");
  });

  it("a full queue gives 429 overloaded with Retry-After: 1", async () => {
    const id = await newSession();
    for (let i = 0; i < 64; i++) expect((await send(id, { type: "user.message", text: `m${i}` })).status).toBe(202);
    expectApiError(await send(id, { type: "user.message", text: "one too many" }), 429, "overloaded");
    // An idempotent retry of an accepted message is still answered.
    expect((await send(id, { type: "user.message", text: "m0" })).status).toBe(429);
  });

  it("user.interrupt cancels queued messages with conflict errors, then interrupted; sends then give 409 until resume", async () => {
    const id = await newSession();
    const idle = await send(id, { type: "user.interrupt" });
    expect(idle.status).toBe(202);
    expect(idle.body).toEqual({ status: "interrupt_requested" });
    expect(await allEvents(id)).toHaveLength(0);

    const m1 = (await send(id, { type: "user.message", text: "a" })).body;
    const m2 = (await send(id, { type: "user.message", text: "b" })).body;
    const r = await send(id, { type: "user.interrupt" });
    expect(r.body).toEqual({ status: "interrupt_requested" });
    const events = await allEvents(id);
    expect(events.slice(2).map((e) => [e.type, e.data.code ?? e.data.status, e.input_id])).toEqual([
      ["session.error", "conflict", m1.id],
      ["session.error", "conflict", m2.id],
      ["session.status", "interrupted", undefined],
    ]);
    expect(events[2].data.message).toMatch(/queued input was interrupted before execution/);
    expectApiError(await send(id, { type: "user.message", text: "c" }), 409, "conflict");
    expectApiError(await call(stack.url, "POST", `/sessions/${id}/resume`, { token: env.WRITE }), 403, "forbidden");
    const resumed = await call(stack.url, "POST", `/sessions/${id}/resume`, { token: env.MANAGE });
    expect(resumed.status).toBe(200);
    expect(resumed.body.status).toBe("idle");
    expectApiError(await call(stack.url, "POST", `/sessions/${id}/resume`, { token: env.MANAGE }), 409, "conflict");
    expect((await send(id, { type: "user.message", text: "c" })).status).toBe(202);
  });

  it("close cancels queued work the same way and later sends give 409", async () => {
    const id = await newSession();
    const m1 = (await send(id, { type: "user.message", text: "a" })).body;
    await call(stack.url, "POST", `/sessions/${id}/close`, { token: env.MANAGE });
    const events = await allEvents(id);
    expect(events.slice(1).map((e) => [e.type, e.data.code ?? e.data.status, e.input_id])).toEqual([
      ["session.error", "conflict", m1.id],
      ["session.status", "closed", undefined],
    ]);
    expectApiError(await send(id, { type: "user.message", text: "x" }), 409, "conflict");
    expectApiError(await send(id, { type: "user.interrupt" }), 409, "conflict");
    expectApiError(await call(stack.url, "POST", `/sessions/${id}/resume`, { token: env.MANAGE }), 409, "conflict");
  });
});

describe("JSON mode", () => {
  it("pages with after + limit; next_cursor is always present; an empty page returns the after sent", async () => {
    const id = await newSession();
    const empty = await page(id);
    expect(empty.body).toEqual({ events: [], next_cursor: "" });
    for (let i = 0; i < 7; i++) await send(id, { type: "user.message", text: `m${i}` });
    const all = await allEvents(id);
    expect(all.map((e) => e.data.text)).toEqual(["m0", "m1", "m2", "m3", "m4", "m5", "m6"]);
    const seen: any[] = [];
    let after = "";
    for (;;) {
      const p = await page(id, `?limit=3&after=${after}`);
      expect(typeof p.body.next_cursor).toBe("string");
      if (p.body.events.length === 0) {
        expect(p.body.next_cursor).toBe(after);
        break;
      }
      seen.push(...p.body.events);
      expect(p.body.next_cursor).toBe(p.body.events.at(-1).cursor);
      after = p.body.next_cursor;
    }
    expect(seen).toEqual(all);
    // The cursor of any retained event continues right after it.
    expect((await page(id, `?after=${all[3].cursor}`)).body.events.map((e: any) => e.data.text)).toEqual(["m4", "m5", "m6"]);
    expect((await page(id, "?limit=100")).body.events).toHaveLength(7);
  });

  it("limit outside 1..1000 gives 400", async () => {
    const id = await newSession();
    expect((await page(id, "?limit=1000")).status).toBe(200);
    expectApiError(await page(id, "?limit=0"), 400, "invalid_request");
    expectApiError(await page(id, "?limit=1001"), 400, "invalid_request");
  });

  it("malformed, fabricated, oversize, event-id and other-session cursors give 409 cursor_unavailable", async () => {
    const id = await newSession();
    const other = await newSession();
    const e = (await send(id, { type: "user.message", text: "x" })).body;
    const o = (await send(other, { type: "user.message", text: "y" })).body;
    const flipped = e.cursor.slice(0, -2) + (e.cursor.at(-2) === "A" ? "B" : "A") + e.cursor.at(-1);
    for (const bad of ["garbage", "%%%", e.id, o.cursor, flipped, "A".repeat(36), "a".repeat(513)]) {
      expectApiError(await page(id, `?after=${encodeURIComponent(bad)}`), 409, "cursor_unavailable");
    }
    expect((await page(id, `?after=${e.cursor}`)).status).toBe(200);
  });
});

describe("SSE mode", () => {
  const sseUrl = (id: string, q = "") => `${stack.url}/sessions/${id}/events${q}`;

  it("replays retained events after the cursor, then live events, with no gaps and no duplicates", async () => {
    const id = await newSession();
    for (let i = 0; i < 30; i++) await send(id, { type: "user.message", text: `r${i}` });
    const all = await allEvents(id);
    const s = await openSse(sseUrl(id, `?after=${all[4].cursor}`), { token: env.READ });
    expect(s.status).toBe(200);
    expect(s.headers.get("content-type")).toBe("text/event-stream");
    expect(s.headers.get("x-request-id")).toMatch(/^[0-9a-f]{32}$/);
    await s.waitFrames(25);
    const live = (await send(id, { type: "user.message", text: "live" })).body;
    await s.waitFrames(26);
    expect(s.frames.map((f) => f.json)).toEqual([...all.slice(5), live]);
    for (const f of s.frames) {
      expect(f.id).toBe(f.json.cursor);
      expect(f.event).toBe(f.json.type);
    }
    s.close();
  });

  it("replays a long log in batches without gaps or duplicates while events are appended during the replay", async () => {
    const id = await newSession();
    // 250 retained events: 64 messages, interrupt (64 errors + status), resume, ... repeated.
    const texts: string[] = [];
    while ((await allEvents(id)).length < 250) {
      for (let i = 0; i < 60; i++) {
        texts.push(`b${texts.length}`);
        await send(id, { type: "user.message", text: texts.at(-1) });
      }
      await send(id, { type: "user.interrupt" });
      await call(stack.url, "POST", `/sessions/${id}/resume`, { token: env.MANAGE });
    }
    const s = await openSse(sseUrl(id), { token: env.READ });
    const during: Promise<unknown>[] = [];
    for (let i = 0; i < 20; i++) during.push(send(id, { type: "user.message", text: `during${i}` }));
    await Promise.all(during);
    const all = await allEvents(id);
    await s.waitFrames(all.length);
    expect(s.frames.map((f) => f.json.id)).toEqual(all.map((e) => e.id));
    expect(new Set(s.frames.map((f) => f.id)).size).toBe(all.length);
    s.close();
  });

  it("after wins over Last-Event-ID, also when empty; Last-Event-ID is used when after is absent", async () => {
    const id = await newSession();
    for (let i = 0; i < 3; i++) await send(id, { type: "user.message", text: `x${i}` });
    const all = await allEvents(id);
    const byHeader = await openSse(sseUrl(id), { token: env.READ, lastEventId: all[0].cursor });
    await byHeader.waitFrames(2);
    expect(byHeader.frames.map((f) => f.json.data.text)).toEqual(["x1", "x2"]);
    const byAfter = await openSse(sseUrl(id, `?after=${all[1].cursor}`), { token: env.READ, lastEventId: all[0].cursor });
    await byAfter.waitFrames(1);
    const emptyAfter = await openSse(sseUrl(id, "?after="), { token: env.READ, lastEventId: all[1].cursor });
    await emptyAfter.waitFrames(3);
    expect(byAfter.frames.map((f) => f.json.data.text)).toEqual(["x2"]);
    expect(emptyAfter.frames.map((f) => f.json.data.text)).toEqual(["x0", "x1", "x2"]);
    for (const s of [byHeader, byAfter, emptyAfter]) s.close();
  });

  it("a bad cursor on an SSE request gives 409 cursor_unavailable; an unknown session 404", async () => {
    const id = await newSession();
    const bad = await call(stack.url, "GET", `/sessions/${id}/events?after=nope`, { token: env.READ, headers: { Accept: "text/event-stream" } });
    expectApiError(bad, 409, "cursor_unavailable");
    const none = await call(stack.url, "GET", `/sessions/${"1".repeat(32)}/events`, { token: env.READ, headers: { Accept: "text/event-stream" } });
    expectApiError(none, 404, "not_found");
  });

  it("frames are id, event, data in that order, ended by a blank line", async () => {
    const id = await newSession();
    const e = (await send(id, { type: "user.message", text: "wire" })).body;
    const ctl = new AbortController();
    const res = await fetch(sseUrl(id), { headers: { Authorization: `Bearer ${env.READ}`, Accept: "text/event-stream" }, signal: ctl.signal });
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (!text.includes("\n\n")) text += (await reader.read()).value ?? "";
    expect(text).toBe(`id: ${e.cursor}\nevent: user.message\ndata: ${JSON.stringify(e)}\n\n`);
    ctl.abort();
  });

  it("a client that goes away is noticed at the next write (a keepalive within 15 s); idle streams get keepalives", { timeout: 30_000 }, async () => {
    // limits.subscribers counts across the deployment: test/e2e/stream-limits.test.ts.
    const id = await newSession();
    const open = [await openSse(sseUrl(id), { token: env.READ }), await openSse(sseUrl(id), { token: env.READ })];
    for (const s of open) expect(s.status).toBe(200);
    // The relay closes its object socket when the client goes away. In the local stack
    // it notices a vanished client at its next write (a keepalive within 15 s).
    open[0]!.close();
    await open[0]!.ended;
    await stack.waitForLog(new RegExp(`"msg":"event stream closed","session_id":"${id}"`), 20_000);
    // Meanwhile the idle stream got its keepalive comment (every 15 s while idle).
    await open[1]!.waitForComment("keepalive");
    expect(open[1]!.frames).toHaveLength(0);
    open[1]!.close();
  });

  it("closing the session ends its streams after its final events; a closed session replays and ends", async () => {
    const id = await newSession();
    const m = (await send(id, { type: "user.message", text: "q" })).body;
    const s = await openSse(sseUrl(id), { token: env.READ });
    await s.waitFrames(1);
    await call(stack.url, "POST", `/sessions/${id}/close`, { token: env.MANAGE });
    await s.ended;
    expect(s.frames.map((f) => [f.event, f.json.data.code ?? f.json.data.status ?? f.json.data.text])).toEqual([
      ["user.message", "q"],
      ["session.error", "conflict"],
      ["session.status", "closed"],
    ]);
    expect(s.frames[1]!.json.input_id).toBe(m.id);
    const replay = await openSse(sseUrl(id), { token: env.READ });
    await replay.ended;
    expect(replay.frames.map((f) => f.event)).toEqual(["user.message", "session.error", "session.status"]);
  });

  it("a closed session whose log takes several replay batches replays every event and ends (large events, and more than 100)", async () => {
    for (const [n, size] of [
      [30, 60_000],
      [60, 10],
    ] as const) {
      const id = await newSession();
      for (let i = 0; i < n; i++) expect((await send(id, { type: "user.message", text: `${i}:${"r".repeat(size)}` })).status).toBe(202);
      expect((await call(stack.url, "POST", `/sessions/${id}/close`, { token: env.MANAGE })).status).toBe(202);
      const all = await allEvents(id);
      const replay = await openSse(sseUrl(id), { token: env.READ });
      const stalled = new Promise<string>((resolve) => setTimeout(() => resolve(`stalled after ${replay.frames.length} of ${all.length} events`), 20_000).unref());
      expect(await Promise.race([replay.ended.then(() => "ended"), stalled])).toBe("ended");
      expect(replay.frames.map((f) => f.json.id)).toEqual(all.map((e) => e.id));
      replay.close();
    }
  });

  it("a slow reader is cut off without affecting the session or a fast subscriber, and resumes from its last cursor", async () => {
    const id = await newSession();
    const fast = await openSse(sseUrl(id), { token: env.READ });
    // The slow client reads nothing until all events are sent.
    const slowRes = await fetch(sseUrl(id), { headers: { Authorization: `Bearer ${env.READ}`, Accept: "text/event-stream" } });
    const text = "s".repeat(MiB - 100);
    for (let i = 0; i < 60; i++) expect((await send(id, { type: "user.message", text: `${i}:${text}` })).status).toBe(202);
    const all = await allEvents(id);
    await fast.waitFrames(60, 30_000);
    expect(fast.frames.map((f) => f.json.id)).toEqual(all.map((e) => e.id));

    const { EventSourceParserStream } = await import("eventsource-parser/stream");
    const got: Frame[] = [];
    const reader = slowRes.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
    let cut = false;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        got.push({ id: value.id, event: value.event, data: value.data, json: JSON.parse(value.data) });
      }
    } catch {
      cut = true;
    }
    expect(got.length).toBeLessThan(60);
    expect(cut || got.length < 60).toBe(true);
    expect(got.map((f) => f.json.id)).toEqual(all.slice(0, got.length).map((e) => e.id));
    const resumed = await openSse(sseUrl(id), { token: env.READ, lastEventId: got.at(-1)?.id ?? "" });
    await resumed.waitFrames(60 - got.length, 30_000);
    expect([...got, ...resumed.frames].map((f) => f.json.id)).toEqual(all.map((e) => e.id));
    // The session is unaffected.
    expect((await send(id, { type: "user.interrupt" })).status).toBe(202);
    for (const s of [fast, resumed]) s.close();
  });
});

describe("session log size", () => {
  it("a send that would bring the log near limits.session_bytes gives 429 overloaded", { timeout: 60_000 }, async () => {
    const small = await startStack({ config: config({ input_bytes: MiB, queue: 3, session_bytes: 16 * MiB }), env, runner: false });
    try {
      const id = await newSession(small);
      const text = "z".repeat(MiB - 200);
      let accepted = 0;
      for (;;) {
        const r = await send(id, { type: "user.message", text }, small);
        if (r.status === 429) {
          expectApiError(r, 429, "overloaded");
          expect(r.body.error.message).toMatch(/^this message would bring the session's event log and native state near their limit \(limits.session_bytes \d+\); a shorter one may still fit$/);
          break;
        }
        expect(r.status).toBe(202);
        accepted += 1;
        if (accepted % 3 === 0) {
          await send(id, { type: "user.interrupt" }, small);
          await call(small.url, "POST", `/sessions/${id}/resume`, { token: env.MANAGE });
        }
      }
      // 16 MiB less the 4 MiB kept for one maximal record; each message still queued counts twice
      // (its event, and the native record its turn will add): 8 one-MiB messages fit.
      expect(accepted).toBeGreaterThanOrEqual(7);
      expect(accepted).toBeLessThanOrEqual(9);
      // What was accepted is intact and still readable; a small message still fits.
      expect((await allEvents(id, small)).filter((e) => e.type === "user.message")).toHaveLength(accepted);
      expect((await send(id, { type: "user.message", text: "small" }, small)).status).toBe(202);
    } finally {
      await small.stop();
    }
  });

  it("a burst of queued messages near limits.session_bytes: every accepted one runs to idle, the first that would not fit gets 429", { timeout: 120_000 }, async () => {
    // The scripted rig's harnesses and providers, not this file's.
    const { providers: _p, harnesses: _h, ...rest } = config({ input_bytes: MiB, session_bytes: 16 * MiB });
    const rig = await startScriptedStack({ config: rest, env: { ...env, OPENAI_KEY: "sk-burst" } });
    try {
      const id = await newSession(rig.stack);
      const sse = await openSse(`${rig.stack.url}/sessions/${id}/events`, { token: env.READ });
      // The first turn waits at the provider while the burst queues behind it.
      expect((await send(id, { type: "user.message", text: "[[hold burst]] first" }, rig.stack)).status).toBe(202);
      await rig.provider.waitForRequests(1, 20_000);
      const big = `[[deltas 1]] ${"x".repeat(MiB - 300)}`;
      const accepted: string[] = [];
      for (;;) {
        const r = await send(id, { type: "user.message", text: big }, rig.stack);
        if (r.status === 429) {
          expectApiError(r, 429, "overloaded");
          break;
        }
        expect(r.status).toBe(202);
        accepted.push(r.body.id);
      }
      // Each queued prompt is recorded twice when it runs (the event, the harness's native record):
      // about (16 MiB − 4 MiB kept) ÷ 2 MiB of them fit.
      expect(accepted.length).toBeGreaterThanOrEqual(5);
      rig.provider.release("burst");
      // The queue's end: idle after the last message, or the failure that ends it early.
      await sse.waitFor((f) => f.event === "session.status" && f.json.data.status !== "running", 60_000);
      expect(sse.frames.filter((f) => f.event === "session.error").map((f) => f.json.data)).toEqual([]);
      expect(sse.frames.filter((f) => f.event === "assistant.message").map((f) => f.json.input_id).slice(1)).toEqual(accepted);
      expect((await call(rig.stack.url, "GET", `/sessions/${id}`, { token: env.READ })).body.status).toBe("idle");
      sse.close();
    } finally {
      await rig.stop();
    }
  });
});
