/**
 * Streams under load on the real local stack with the reference harness: `limits.subscribers`
 * counts SSE streams across the deployment (every session, every tenant) with a per-tenant share,
 * and a burst of large deltas reaches a client that reads as fast as it can (queued deltas of one
 * turn are merged, so `subscriber_events` cuts only a reader that really falls behind).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call } from "../helpers/api.ts";
import { openSse, type SseStream } from "../helpers/sse.ts";
import { secret, type Stack, startScriptedStack, type ScriptedStack } from "../helpers/stack.ts";

const env = { A: secret("limits-a"), B: secret("limits-b"), OPENAI_KEY: "sk-limits" };
let rig: ScriptedStack;
let stack: Stack;

beforeAll(async () => {
  rig = await startScriptedStack({
    config: {
      tokens: [
        { token_env: "A", tenant: "a", manage: true },
        { token_env: "B", tenant: "b", manage: true },
      ],
      limits: { subscriber_events: 64, subscriber_bytes: 8 * 1024 * 1024, subscribers: 8 },
    },
    env,
  });
  ({ stack } = rig);
});
afterAll(() => rig?.stop());

async function newSession(token = env.A): Promise<string> {
  const r = await call(stack.url, "POST", "/sessions", { token, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } });
  expect(r.status).toBe(201);
  return r.body.id;
}
const sseUrl = (id: string) => `${stack.url}/sessions/${id}/events`;

describe("limits.subscribers (8) across the deployment, two tenants (share: 6 each)", () => {
  const stream = (id: string, token: string) => call(stack.url, "GET", `/sessions/${id}/events`, { token, headers: { Accept: "text/event-stream" } });
  const close = (id: string, token: string) => call(stack.url, "POST", `/sessions/${id}/close`, { token });

  it("counts streams on every session: a tenant stops at its share, the deployment at the cap, and an ended stream frees its slot", { timeout: 60_000 }, async () => {
    const open: { id: string; token: string; sse: SseStream }[] = [];
    const openOn = async (token: string) => {
      const id = await newSession(token);
      const sse = await openSse(sseUrl(id), { token });
      expect(sse.status).toBe(200);
      open.push({ id, token, sse });
    };
    for (let i = 0; i < 6; i++) await openOn(env.A);
    // Tenant a holds its share (6 of 8) on six sessions: a seventh session's stream is refused.
    const aFull = await stream(await newSession(env.A), env.A);
    expect(aFull.status).toBe(429);
    expect(aFull.headers.get("retry-after")).toBe("1");
    expect(aFull.body.error.code).toBe("overloaded");
    expect(aFull.body.error.message).toMatch(/limits\.subscribers .*this tenant's share of it/);
    // Tenant b still gets the two left; then the deployment is full for everyone.
    for (let i = 0; i < 2; i++) await openOn(env.B);
    const bFull = await stream(await newSession(env.B), env.B);
    expect(bFull.status).toBe(429);
    expect(bFull.body.error.code).toBe("overloaded");
    // The limit is checked once the session is found and before the cursor is.
    expect((await stream("0".repeat(32), env.B)).status).toBe(404);
    const junk = await call(stack.url, "GET", `/sessions/${open[0]!.id}/events?after=junk`, { token: env.A, headers: { Accept: "text/event-stream" } });
    expect(junk.status).toBe(429);
    // Closing a session ends its stream and frees the slot: the next stream opens (here b's), and
    // the deployment is full again.
    const first = open.shift()!;
    await close(first.id, first.token);
    await first.sse.ended;
    await openOn(env.B);
    expect((await stream(await newSession(env.A), env.A)).status).toBe(429);
    for (const o of open) {
      await close(o.id, o.token);
      await o.sse.ended;
    }
    // Everything was given back: a fresh stream opens.
    const again = await newSession(env.A);
    const s = await openSse(sseUrl(again), { token: env.A });
    expect(s.status).toBe(200);
    await close(again, env.A);
    await s.ended;
  });
});

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
