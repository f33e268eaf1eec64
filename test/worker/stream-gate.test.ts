/**
 * `limits.subscribers` across the deployment (docs/api.md "SSE"): the
 * StreamGate with several isolates' slot holders (StreamSlots instances standing in for isolates),
 * and the Worker's SSE route with streams on many sessions. The pool's config: subscribers 2, two
 * tenants (share: 2).
 */
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { newId } from "../../src/shared/ids.ts";
import { LEASE_TTL_MS } from "../../src/streams/stream-gate.ts";
import { StreamSlots } from "../../src/streams/stream-slots.ts";
import { api, createSession, env, expectApiError, sseReader } from "./helpers.ts";

/** Holders on a gate of their own (a fresh name), so tests do not share counts. */
function isolates(n: number) {
  const gate = env.STREAMS.getByName(`test-${newId()}`);
  return { gate, slots: Array.from({ length: n }, () => new StreamSlots((h, seq, w) => gate.sync(h, seq, w))) };
}

describe("StreamGate: slots held by several isolates", () => {
  it("hands out at most limits.subscribers (2) slots across isolates; a released one can be taken elsewhere", async () => {
    const { slots: [a, b] } = isolates(2);
    expect(await a!.acquire("acme")).toBe(true);
    expect(await b!.acquire("acme")).toBe(true);
    expect(await a!.acquire("acme")).toBe(false);
    expect(await b!.acquire("other")).toBe(false);
    await a!.release("acme");
    expect(await b!.acquire("other")).toBe(true);
    expect(await a!.acquire("acme")).toBe(false);
    expect(a!.snapshot()).toEqual({});
    expect(b!.snapshot()).toEqual({ acme: { inUse: 1, held: 1 }, other: { inUse: 1, held: 1 } });
  });

  it("frees the slots of an isolate that stopped renewing once its holding expires", async () => {
    const { gate, slots: [a, b] } = isolates(2);
    expect(await a!.acquire("acme")).toBe(true);
    expect(await a!.acquire("acme")).toBe(true);
    expect(await b!.acquire("acme")).toBe(false);
    // Isolate a dies: nothing renews its holding, whose expiry passes.
    await runInDurableObject(gate, (_, state) => state.storage.sql.exec("UPDATE holdings SET expires_at = ?", Date.now() - 1));
    expect(await b!.acquire("acme")).toBe(true);
  });

  it("drops the holdings synced before its instance started (a runtime restart ended those isolates): a fresh one gets its slots at once", async () => {
    const { gate, slots: [a, b] } = isolates(2);
    const beforeStart = Date.now();
    expect(await a!.acquire("acme")).toBe(true);
    expect(await a!.acquire("acme")).toBe(true);
    expect(await b!.acquire("acme")).toBe(false);
    // As if a's holding had last been renewed just before this instance started, by a runtime
    // that is gone: not expired yet (LEASE_TTL_MS is 60 s), but no isolate of that runtime lives.
    await runInDurableObject(gate, (_, state) => state.storage.sql.exec("UPDATE holdings SET expires_at = ?", beforeStart - 1 + LEASE_TTL_MS));
    expect(await b!.acquire("acme")).toBe(true);
    expect(await b!.acquire("acme")).toBe(true);
  });

  it("counts a tenant named __proto__ like any other: its stream and another tenant's open beside it, and the slots come back", async () => {
    const { slots: [a, b] } = isolates(2);
    expect(await a!.acquire("__proto__")).toBe(true);
    expect(await a!.acquire("acme")).toBe(true);
    expect(await b!.acquire("acme")).toBe(false);
    await a!.release("__proto__");
    expect(await b!.acquire("acme")).toBe(true);
  });

  it("serves an isolate of the previous release, which states its wants as a plain object, and a holder reads such a gate's plain-object grant", async () => {
    const { gate } = isolates(0);
    const granted = await gate.sync("old-isolate", 1, { acme: { need: 1, want: 1 } });
    expect(granted.slots).toEqual(new Map([["acme", 1]]));
    const a = new StreamSlots(async () => ({ seq: 1, slots: { acme: 1 } as never, keep: 1, stale: false }));
    expect(await a.acquire("acme")).toBe(true);
    expect(a.snapshot()).toEqual({ acme: { inUse: 1, held: 1 } });
  });

  it("serves concurrent opens of one isolate with one gate call each time its block runs out", async () => {
    const { slots: [a] } = isolates(1);
    const got = await Promise.all([a!.acquire("acme"), a!.acquire("acme"), a!.acquire("acme")]);
    expect(got.sort()).toEqual([false, true, true]);
    expect(a!.snapshot()).toEqual({ acme: { inUse: 2, held: 2 } });
  });
});

describe("SSE through the Worker: limits.subscribers counts streams on every session", () => {
  const open = (id: string, query = "") => api(`/sessions/${id}/events${query}`, { headers: { Accept: "text/event-stream" } });
  /** Closing a session ends its streams; the relay gives the slot back before the client sees the end. */
  async function endByClose(id: string, r: ReturnType<typeof sseReader>) {
    expect((await api(`/sessions/${id}/close`, { method: "POST" })).status).toBe(202);
    while ((await r.next("the rest of the stream")) !== undefined);
  }

  it("answers 429 overloaded with Retry-After: 1 for a new stream on another session when 2 are open, and opens one once a stream ended", async () => {
    const [s1, s2, s3] = [await createSession(), await createSession(), await createSession()];
    const a = sseReader((await open(s1.id)).body!);
    const b = sseReader((await open(s2.id)).body!);
    const third = await open(s3.id);
    expect(third.headers.get("Retry-After")).toBe("1");
    await expectApiError(third, 429, "overloaded");
    await endByClose(s1.id, a);
    const c = sseReader((await open(s3.id)).body!);
    await endByClose(s2.id, b);
    await endByClose(s3.id, c);
  });

  it("gives the slot back when the session refuses the stream: a bad cursor (409) or an unknown session (404) takes none", async () => {
    const [s1, s2] = [await createSession(), await createSession()];
    for (let i = 0; i < 3; i++) {
      await expectApiError(await open(s1.id, "?after=nope"), 409, "cursor_unavailable");
      await expectApiError(await open(newId()), 404, "not_found");
    }
    const a = sseReader((await open(s1.id)).body!);
    const b = sseReader((await open(s2.id)).body!);
    await endByClose(s1.id, a);
    await endByClose(s2.id, b);
  });

  it("counts an executor's command stream too: the third SSE connection is 429 whatever it carries, and the refused one does not replace the executor's live connection", async () => {
    const register = async () => {
      const tools = [{ name: "lookup", description: "d", input_schema: { type: "object" } }];
      const res = await api("/executors", { method: "POST", body: JSON.stringify({ binding: "dict", tools }) });
      return (await res.json()) as { id: string; token: string };
    };
    const commands = (e: { id: string; token: string }) => api(`/executors/${e.id}/commands`, { token: e.token });
    const [x, y] = [await register(), await register()];
    const s1 = await createSession();
    const events = sseReader((await open(s1.id)).body!);
    const live = await commands(x);
    expect(live.status).toBe(200);
    const liveFrames = sseReader(live.body!);
    expect((await liveFrames.next("ready"))!.event).toBe("ready");
    // Full (2): another executor's stream, a second stream of the same executor, and an event stream.
    const refused = await commands(y);
    expect(refused.headers.get("Retry-After")).toBe("1");
    await expectApiError(refused, 429, "overloaded");
    await expectApiError(await commands(x), 429, "overloaded");
    await expectApiError(await open((await createSession()).id), 429, "overloaded");
    // Token checks come first: a wrong token is 401, an unknown executor 404, also when full.
    await expectApiError(await api(`/executors/${x.id}/commands`, { token: y.token }), 401, "forbidden");
    await expectApiError(await api(`/executors/${newId()}/commands`, { token: x.token }), 404, "not_found");
    // x's live connection was not replaced by the refused second stream.
    const info = await runInDurableObject(env.EXECUTORS.getByName(x.id), (_, state) => state.getWebSockets().length);
    expect(info).toBe(1);
    // A command stream that ended (its executor closed) has given its slot back before the client sees the end.
    expect((await api(`/executors/${x.id}/close`, { method: "POST", token: x.token, body: "{}" })).status).toBe(200);
    while ((await liveFrames.next("the rest of the command stream")) !== undefined);
    const opened = await commands(y);
    expect(opened.status).toBe(200);
    await opened.body!.cancel();
    await endByClose(s1.id, events);
  });
});
