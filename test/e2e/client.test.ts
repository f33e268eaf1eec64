/**
 * The typed client (client/) on the real local stack: its resumable `stream` survives a dropped
 * connection and a SIGHUP reload mid-turn with no gap and no duplicate, ends on `closed`, and waits
 * out `Retry-After` on `429`. Every response it gets is checked against openapi.json.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { ApiError, SvcClient, type SessionEvent } from "../../client/index.ts";
import { checkedFetch } from "../helpers/api.ts";
import { startProxy, type Proxy } from "../helpers/proxy.ts";
import { openSse } from "../helpers/sse.ts";
import { secret, startStack, type Stack, oneTenantConfig } from "../helpers/stack.ts";

const env = { MANAGE: secret("client-manage"), OPENAI_KEY: "sk-client-test" };
let provider: ScriptedProvider;

beforeAll(async () => {
  provider = await startScriptedProvider();
});
afterAll(async () => {
  await provider?.close();
});

const config = (limits: Record<string, number> = {}) => oneTenantConfig(provider.url, limits);
const newSession = (svc: SvcClient) => svc.createSession({ harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } });

/** Collects a stream in the background; `until` resolves at the first event matching. */
function collect(it: AsyncGenerator<SessionEvent>) {
  const got: SessionEvent[] = [];
  const waiters: { pred: (e: SessionEvent) => boolean; resolve: () => void }[] = [];
  const done = (async () => {
    for await (const e of it) {
      got.push(e);
      for (const w of [...waiters]) if (w.pred(e)) (waiters.splice(waiters.indexOf(w), 1), w.resolve());
    }
  })();
  const until = (pred: (e: SessionEvent) => boolean, ms = 30_000) =>
    got.some(pred)
      ? Promise.resolve()
      : new Promise<void>((resolve, reject) => {
          const t = setTimeout(() => reject(new Error(`timed out; got ${got.map((e) => e.type).join(",")}`)), ms);
          waiters.push({ pred, resolve: () => (clearTimeout(t), resolve()) });
        });
  return { got, done, until };
}

async function fullLog(svc: SvcClient, id: string) {
  const out: SessionEvent[] = [];
  for (let after = ""; ; ) {
    const p = await svc.events(id, { after, limit: 1000 });
    if (p.events.length === 0) return out;
    out.push(...p.events);
    after = p.next_cursor;
  }
}

type Retained = Extract<SessionEvent, { cursor: string }>;
const retained = (events: SessionEvent[]) => events.filter((e): e is Retained => "cursor" in e);
const isStatus = (s: string) => (e: SessionEvent) => e.type === "session.status" && e.data.status === s;

describe("client stream", () => {
  let stack: Stack;
  let proxy: Proxy;
  beforeAll(async () => {
    stack = await startStack({ config: config(), env });
    proxy = await startProxy(stack.url);
  });
  afterAll(async () => {
    await proxy?.close();
    await stack?.stop();
  });

  it("survives a dropped connection mid-turn: resumes with the last cursor, no gap, no duplicate, and ends on closed", async () => {
    const svc = new SvcClient({ baseUrl: proxy.url, token: env.MANAGE, fetch: checkedFetch });
    const s = await newSession(svc);
    const resumedFrom: string[] = [];
    const stream = collect(svc.stream(s.id, { onReconnect: (cursor) => resumedFrom.push(cursor) }));
    const inputs: { id: string }[] = [];
    for (let i = 0; i < 3; i++) inputs.push(await svc.sendMessage(s.id, `[[deltas 30 size=2]] [[delay 20]] turn ${i}`, { key: `k${i}` }));
    // Cut the network path once the first turn has finished and the second is under way.
    await stream.until((e) => e.type === "assistant.message");
    await stream.until((e) => e.type === "assistant.delta" && e.input_id === inputs[1]!.id);
    const lastBefore = retained(stream.got).at(-1)!.cursor;
    expect(proxy.cut()).toBeGreaterThan(0);
    await stream.until(isStatus("idle"));
    await svc.close(s.id);
    await stream.done; // ends by itself after `closed`

    expect(resumedFrom[0]).toBe(lastBefore);
    const log = await fullLog(svc, s.id);
    expect(log.at(-1)).toMatchObject({ type: "session.status", data: { status: "closed" } });
    expect(retained(stream.got).map((e) => e.id)).toEqual(log.map((e) => e.id));
    expect(log.filter((e) => e.type === "assistant.message")).toHaveLength(3);
  });

  it("survives a SIGHUP reload of the Worker runtime mid-turn", async () => {
    const svc = new SvcClient({ baseUrl: stack.url, token: env.MANAGE, fetch: checkedFetch });
    const s = await newSession(svc);
    let reconnects = 0;
    const stream = collect(svc.stream(s.id, { onReconnect: () => reconnects++ }));
    await svc.sendMessage(s.id, "[[deltas 80 size=2]] [[delay 25]]");
    await stream.until((e) => e.type === "assistant.delta");
    const mark = stack.mark();
    stack.child.kill("SIGHUP");
    await stack.waitForLog(/"msg":"worker reloaded"/, 30_000, mark);
    await stream.until(isStatus("idle"));
    await svc.close(s.id);
    await stream.done;

    expect(reconnects).toBeGreaterThan(0);
    const log = await fullLog(svc, s.id);
    expect(log.map((e) => e.type)).toEqual(["user.message", "session.status", "assistant.message", "session.status", "session.status"]);
    expect(retained(stream.got).map((e) => e.id)).toEqual(log.map((e) => e.id));
  });
});

describe("client and 429", () => {
  let stack: Stack;
  beforeAll(async () => {
    // No runner-host: accepted messages wait, so the queue and the streams are easy to fill.
    stack = await startStack({ config: config({ queue: 1, subscribers: 1 }), env, runner: false });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  /** A checked fetch that also notes when each 429 arrived; `refusals(n)` waits for the n-th. */
  function noting() {
    const refused: number[] = [];
    const waiters: { n: number; resolve: () => void }[] = [];
    const f: typeof fetch = async (input, init) => {
      const res = await checkedFetch(input, init);
      if (res.status === 429) refused.push(performance.now());
      for (const w of [...waiters]) if (refused.length >= w.n) (waiters.splice(waiters.indexOf(w), 1), w.resolve());
      return res;
    };
    const refusals = (n: number, ms = 10_000) =>
      refused.length >= n
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => {
            const t = setTimeout(() => reject(new Error(`only ${refused.length} refusals`)), ms);
            waiters.push({ n, resolve: () => (clearTimeout(t), resolve()) });
          });
    return { refused, fetch: f, refusals };
  }

  it("a send refused with 429 is retried after Retry-After and goes through once there is room; without room the ApiError says overloaded", async () => {
    const n = noting();
    const svc = new SvcClient({ baseUrl: stack.url, token: env.MANAGE, fetch: n.fetch, retries: 2 });
    const s = await newSession(svc);
    await svc.sendMessage(s.id, "first");
    const err = await svc.sendMessage(s.id, "second").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 429, code: "overloaded", retryAfter: 1 });
    expect(n.refused).toHaveLength(3);
    for (let i = 1; i < 3; i++) expect(n.refused[i]! - n.refused[i - 1]!).toBeGreaterThanOrEqual(1000);

    // Room appears while the client waits: the interrupt cancels the queued input.
    n.refused.length = 0;
    const pending = svc.sendMessage(s.id, "third", { key: "third" });
    await n.refusals(1);
    await svc.interrupt(s.id);
    await svc.resume(s.id);
    const third = await pending;
    expect(third.data).toMatchObject({ text: "third", key: "third" });
  });

  it("stream waits out 429 while every stream slot is taken, then replays and ends on closed", async () => {
    const n = noting();
    const svc = new SvcClient({ baseUrl: stack.url, token: env.MANAGE, fetch: n.fetch });
    const s = await newSession(svc);
    await svc.sendMessage(s.id, "hello");
    const holder = await openSse(`${stack.url}/sessions/${s.id}/events`, { token: env.MANAGE });
    expect(holder.status).toBe(200);
    const stream = collect(svc.stream(s.id));
    await n.refusals(2);
    expect(n.refused[1]! - n.refused[0]!).toBeGreaterThanOrEqual(1000);
    // Closing the session ends the holder's stream and frees the slot.
    await svc.close(s.id);
    await holder.ended;
    await stream.done;
    expect(stream.got.map((e) => e.type)).toEqual(["user.message", "session.error", "session.status"]);
    expect(stream.got.at(-1)).toMatchObject({ data: { status: "closed" } });
  });

  it("a stream opened after a closed session's last event ends at once instead of reconnecting", async () => {
    const svc = new SvcClient({ baseUrl: stack.url, token: env.MANAGE });
    const s = await newSession(svc);
    await svc.close(s.id);
    const page = await svc.events(s.id);
    const last = page.events.at(-1)!;
    expect(last).toMatchObject({ type: "session.status", data: { status: "closed" } });
    let reconnects = 0;
    const stream = collect(svc.stream(s.id, { after: "cursor" in last ? last.cursor : "", onReconnect: () => reconnects++ }));
    await stream.done;
    expect(stream.got).toEqual([]);
    expect(reconnects).toBe(0);
  });
});
