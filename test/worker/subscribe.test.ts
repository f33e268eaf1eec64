/**
 * Event streams: the subscribe socket protocol between the Worker's SSE relay and a SessionObject
 * (docs/api.md "SSE"; docs/architecture.md), driven directly through
 * the object's stub, and the Worker relay end to end through `exports.default.fetch`.
 */
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Event, EventList } from "../../src/shared/api-schema.ts";
import type { SessionObject } from "../../src/session/session-object.ts";
import { REPLAY_BATCH, REPLAY_BATCH_BYTES, type SubscribeDown } from "../../src/shared/subscribe-protocol.ts";
import {
  api,
  appendRecords,
  createSession,
  expectApiError,
  freshSession,
  ok,
  sendMessage,
  sessionStub,
  sseReader,
  subscribe,
  type RawFrame,
  type Stub,
  type Subscriber,
  withTimeout,
} from "./helpers.ts";



async function createdStub() {
  const { n, stub } = freshSession();
  ok(await stub.create(n));
  return stub;
}

const records = (n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => ({ type: "assistant.message", data: { text: `e${from + i}` } }));

async function allEvents(stub: Stub): Promise<Event[]> {
  return ok<EventList>(await stub.readEvents("", 1000)).events;
}

async function send(stub: Stub, text: string): Promise<Event> {
  return ok<Event>(await stub.send({ type: "user.message", text }));
}

/** Records the outcome of the object's next webSocketClose call (the runtime calls the instance's method). */
async function watchClose(stub: Stub): Promise<{ handled: Promise<string> }> {
  let settled!: (outcome: string) => void;
  const handled = new Promise<string>((resolve) => (settled = resolve));
  await runInDurableObject(stub, (instance: SessionObject) => {
    const original = instance.webSocketClose.bind(instance);
    instance.webSocketClose = async (ws: WebSocket, code: number) => {
      try {
        await original(ws, code);
        settled("handled");
      } catch (e) {
        settled(String(e));
        throw e;
      }
    };
  });
  return { handled };
}

type Replay = Extract<SubscribeDown, { t: "replay" }>;

async function nextReplay(s: Subscriber, what: string): Promise<Replay> {
  const m = await s.next(what);
  if (m.t !== "replay") throw new Error(`expected a replay batch (${what}), got ${JSON.stringify(m).slice(0, 200)}`);
  return m;
}

/** A stream on `stub` after `after` with nothing left to replay: it asks once and is live. */
async function liveStream(stub: Stub, after = "", who = "the stream"): Promise<Subscriber> {
  const s = await subscribe(stub, after);
  s.more();
  expect(await s.next(`${who}'s switch to live`)).toEqual({ t: "replay", events: [], live: true });
  return s;
}

describe("subscribe socket: replay, then live", () => {
  it("replays retained events in batches of at most 100, pulled with more, then switches to live", async () => {
    const stub = await createdStub();
    await appendRecords(stub, records(250));
    const s = await subscribe(stub, "");
    const sizes: number[] = [];
    const lives: boolean[] = [];
    const seen: Event[] = [];
    for (;;) {
      s.more();
      const b = await nextReplay(s, `replay batch ${sizes.length + 1}`);
      sizes.push(b.events.length);
      lives.push(b.live);
      seen.push(...b.events);
      if (b.live) break;
    }
    expect(REPLAY_BATCH).toBe(100);
    expect(sizes).toEqual([100, 100, 50]);
    expect(lives).toEqual([false, false, true]);
    expect(seen).toEqual(await allEvents(stub));
    for (const e of seen) expect(e.cursor).toMatch(/^[A-Za-z0-9_-]+$/);

    const e = await send(stub, "after replay");
    expect(await s.next("the live push")).toEqual({ t: "live", events: [e] });
    s.ws.close(1000);
  });

  it("stops a replay batch at 256 KiB of records, and still sends a larger record alone", async () => {
    const stub = await createdStub();
    // Five records of ~100 KB: two fit a batch, a third would not. Then one of ~600 KB.
    const big = (i: number, kb: number) => ({ type: "assistant.message", data: { text: `${i}`.padEnd(kb * 1000, "x") } });
    await appendRecords(stub, [0, 1, 2, 3, 4].map((i) => big(i, 100)));
    await appendRecords(stub, [big(5, 600)]);
    const s = await subscribe(stub, "");
    const sizes: number[] = [];
    for (;;) {
      s.more();
      const b = await nextReplay(s, `replay batch ${sizes.length + 1}`);
      sizes.push(b.events.length);
      if (b.live) break;
    }
    expect(REPLAY_BATCH_BYTES).toBe(256 * 1024);
    expect(sizes).toEqual([2, 2, 1, 1]);
    s.ws.close(1000);
  });

  it("starts after the cursor it was given", async () => {
    const stub = await createdStub();
    await appendRecords(stub, records(5));
    const all = await allEvents(stub);
    const s = await subscribe(stub, all[1]!.cursor!);
    s.more();
    expect(await nextReplay(s, "the replay")).toEqual({ t: "replay", events: all.slice(2), live: true });
    s.ws.close(1000);
  });

  it("goes live at once with an empty batch when nothing is retained after the cursor", async () => {
    const stub = await createdStub();
    const s = await subscribe(stub, "");
    s.more();
    expect(await s.next("the first batch")).toEqual({ t: "replay", events: [], live: true });
    const e = await send(stub, "first");
    expect(await s.next("the live push")).toEqual({ t: "live", events: [e] });
    s.ws.close(1000);
  });

  it("delivers appends made between replay batches exactly once and in order (no gaps, no duplicates)", async () => {
    const stub = await createdStub();
    await appendRecords(stub, records(230));
    const s = await subscribe(stub, "");
    const received: Event[] = [];
    let sends = 0;
    // Each `more` races an append; whichever the object handles first, the event arrives once.
    for (;;) {
      s.more();
      const appended = sends < 2 ? send(stub, `during replay ${sends++}`) : undefined;
      const b = await nextReplay(s, "a replay batch");
      received.push(...b.events);
      await appended;
      if (b.live) break;
    }
    await send(stub, "after live");
    ok(await stub.close());
    for (;;) {
      const m = await s.next("live events until end");
      if (m.t === "end") break;
      expect(m.t).toBe("live");
      if (m.t === "live") received.push(...m.events);
    }
    expect(await s.closed).toBe(1000);

    const log = await allEvents(stub);
    expect(received.map((e) => e.id)).toEqual(log.map((e) => e.id));
    expect(received).toEqual(log);
    expect(new Set(received.map((e) => e.id)).size).toBe(received.length);
    expect(log.at(-1)!.data).toEqual({ status: "closed" });
  });
});

describe("subscribe socket: streams joining and leaving a live session", () => {
  it("pushes to a stream that went live after others had been pushed to, stops at one that closed, and goes on after hibernation", async () => {
    const stub = await createdStub();
    const a = await liveStream(stub, "", "a");
    const e1 = await send(stub, "one");
    expect(await a.next("a's push of one")).toEqual({ t: "live", events: [e1] });
    // A second stream joins once the object has been pushing to the first.
    const b = await liveStream(stub, e1.cursor!, "b");
    const e2 = await send(stub, "two");
    expect(await a.next("a's push of two")).toEqual({ t: "live", events: [e2] });
    expect(await b.next("b's push of two")).toEqual({ t: "live", events: [e2] });
    a.ws.close(1000);
    await a.closed;
    const e3 = await send(stub, "three");
    expect(await b.next("b's push of three")).toEqual({ t: "live", events: [e3] });
    await evictDurableObject(stub, { webSockets: "hibernate" });
    ok(await stub.close());
    const last = await b.next("b's push of the close");
    expect(last.t === "live" && last.events.map((e) => e.type)).toContain("session.status");
    expect(await b.next("b's end")).toEqual({ t: "end" });
  });
});

describe("subscribe socket: refusals", () => {
  it("answers 409 cursor_unavailable for a fabricated cursor, an event id, or another session's cursor", async () => {
    const stub = await createdStub();
    const e = await send(stub, "x");
    const other = await createdStub();
    const foreign = await send(other, "y");
    for (const after of ["garbage", e.id, foreign.cursor!, "A".repeat(600)]) {
      const res = await stub.fetch(`https://session/subscribe?after=${encodeURIComponent(after)}`, { headers: { Upgrade: "websocket" } });
      expect(res.status).toBe(409);
      expect(await res.json()).toMatchObject({ code: "cursor_unavailable" });
    }
  });

  it("answers 404 not_found for a session that was never created", async () => {
    const { stub } = freshSession();
    const res = await stub.fetch("https://session/subscribe?after=", { headers: { Upgrade: "websocket" } });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ code: "not_found" });
  });

  it("does not count streams itself: limits.subscribers is the Worker's, across the deployment", async () => {
    const stub = await createdStub();
    const open = [await subscribe(stub), await subscribe(stub), await subscribe(stub)];
    for (const s of open) s.ws.close(1000);
  });

  it("closes the socket with 1008 on a message other than more", async () => {
    const stub = await createdStub();
    const s = await subscribe(stub);
    s.ws.send("gimme");
    expect(await s.closed).toBe(1008);
  });
});

describe("subscribe socket: closed sessions", () => {
  it("replays a closed session's events, then sends end and closes", async () => {
    const stub = await createdStub();
    await send(stub, "a");
    await send(stub, "b");
    ok(await stub.close());
    const all = await allEvents(stub);
    expect(all).toHaveLength(5);
    const s = await subscribe(stub, "");
    s.more();
    expect(await s.next("the replay")).toEqual({ t: "replay", events: all, live: false });
    expect(await s.next("the end")).toEqual({ t: "end" });
    expect(await s.closed).toBe(1000);
  });

  it("ends at once when nothing is left after the cursor of a closed session", async () => {
    const stub = await createdStub();
    ok(await stub.close());
    const [last] = await allEvents(stub);
    const s = await subscribe(stub, last!.cursor!);
    s.more();
    expect(await s.next("the end")).toEqual({ t: "end" });
    expect(await s.closed).toBe(1000);
  });

  it("finishes a replay interrupted by close with the final events, then end", async () => {
    const stub = await createdStub();
    await appendRecords(stub, records(150));
    const s = await subscribe(stub, "");
    s.more();
    expect((await nextReplay(s, "batch 1")).events).toHaveLength(100);
    ok(await stub.close());
    const all = await allEvents(stub);
    expect(all).toHaveLength(151);
    s.more();
    expect(await s.next("the rest")).toEqual({ t: "replay", events: all.slice(100), live: false });
    expect(await s.next("the end")).toEqual({ t: "end" });
    expect(await s.closed).toBe(1000);
  });

  it("ends a live stream after the session's final events when it closes", async () => {
    const stub = await createdStub();
    const queued = await send(stub, "queued");
    const s = await subscribe(stub, queued.cursor!);
    s.more();
    expect(await s.next("the switch to live")).toEqual({ t: "replay", events: [], live: true });
    ok(await stub.close());
    const live = await s.next("the final events");
    expect(live.t).toBe("live");
    if (live.t !== "live") return;
    expect(live.events.map((e) => [e.type, e.input_id])).toEqual([
      ["session.error", queued.id],
      ["session.status", undefined],
    ]);
    expect(await s.next("the end")).toEqual({ t: "end" });
    expect(await s.closed).toBe(1000);
  });
});

describe("subscribe socket: shutdown", () => {
  it("answers the relay's end with end after everything it already sent, and closes", async () => {
    const stub = await createdStub();
    const s = await liveStream(stub);
    const e = await send(stub, "the last one");
    s.ws.send("end");
    expect(await s.next("the live push")).toEqual({ t: "live", events: [e] });
    expect(await s.next("the end")).toEqual({ t: "end" });
    expect(await s.closed).toBe(1000);
  });
});

describe("subscribe socket: hibernation", () => {
  it("keeps a live socket usable across hibernation: a later append is still delivered live", async () => {
    const stub = await createdStub();
    const s = await liveStream(stub);
    await evictDurableObject(stub, { webSockets: "hibernate" });
    expect(s.ws.readyState).toBe(WebSocket.OPEN);
    const e = await send(stub, "after hibernation");
    expect(await s.next("the live push after hibernation")).toEqual({ t: "live", events: [e] });
    // Still the same protocol on the same socket: `more` while live is ignored, the next push arrives.
    s.more();
    const e2 = await send(stub, "again");
    expect(await s.next("the second live push")).toEqual({ t: "live", events: [e2] });
    s.ws.close(1000);
  });

  it("ends a hibernated live stream when the session closes", async () => {
    const stub = await createdStub();
    const s = await liveStream(stub);
    await evictDurableObject(stub, { webSockets: "hibernate" });
    ok(await stub.close());
    const live = await s.next("the final event");
    expect(live.t === "live" && live.events.map((e) => e.data)).toEqual([{ status: "closed" }]);
    expect(await s.next("the end")).toEqual({ t: "end" });
    expect(await s.closed).toBe(1000);
  });

  it("continues a replay across hibernation from the position in the socket's attachment", async () => {
    const stub = await createdStub();
    await appendRecords(stub, records(150));
    const all = await allEvents(stub);
    const s = await subscribe(stub, "");
    s.more();
    expect(await nextReplay(s, "batch 1")).toEqual({ t: "replay", events: all.slice(0, 100), live: false });
    await evictDurableObject(stub, { webSockets: "hibernate" });
    s.more();
    expect(await nextReplay(s, "batch 2 after hibernation")).toEqual({ t: "replay", events: all.slice(100), live: true });
    const e = await send(stub, "live after hibernation");
    expect(await s.next("the live push")).toEqual({ t: "live", events: [e] });
    s.ws.close(1000);
  });
});

describe("SSE through the Worker relay", () => {
  const open = (id: string, query = "", headers: Record<string, string> = {}) =>
    api(`/sessions/${id}/events${query}`, { headers: { Accept: "text/event-stream", ...headers } });

  function expectRetainedFrame(f: RawFrame | undefined, e: Event) {
    expect(f, "a frame").toBeDefined();
    expect(f!.lines).toEqual([`id: ${e.cursor}`, `event: ${e.type}`, `data: ${JSON.stringify(e)}`]);
    expect(JSON.parse(f!.data!)).toEqual(e);
  }

  it("streams replay then live frames: id (the cursor) before event, data the JSON envelope, until the session closes", async () => {
    const s = await createSession();
    const first = await sendMessage(s.id, "before the stream");
    const res = await open(s.id);
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toBe("text/event-stream");
    expect(res.headers.get("X-Request-ID")).toMatch(/^[0-9a-f]{32}$/);
    const r = sseReader(res.body!);
    expectRetainedFrame(await r.next("the replayed frame"), first);
    const second = await sendMessage(s.id, "while streaming");
    expectRetainedFrame(await r.next("the live frame"), second);

    expect((await api(`/sessions/${s.id}/close`, { method: "POST" })).status).toBe(202);
    const log = ((await (await api(`/sessions/${s.id}/events?after=${second.cursor}`)).json()) as { events: Event[] }).events;
    expect(log.map((e) => e.type)).toEqual(["session.error", "session.error", "session.status"]);
    for (const e of log) expectRetainedFrame(await r.next(`the ${e.type} frame`), e);
    expect(await r.next("the end of the stream")).toBeUndefined();
  });

  it("lets a reading client take a burst of live events larger than subscriber_events (2) at once", async () => {
    const s = await createSession();
    const sent = [await sendMessage(s.id, "a"), await sendMessage(s.id, "b"), await sendMessage(s.id, "c")];
    const r = sseReader((await open(s.id)).body!);
    for (const e of sent) expectRetainedFrame(await r.next("a replayed frame"), e);
    // Close cancels three queued inputs: four events published together in one live message.
    expect((await api(`/sessions/${s.id}/close`, { method: "POST" })).status).toBe(202);
    const log = ((await (await api(`/sessions/${s.id}/events?after=${sent[2]!.cursor}`)).json()) as { events: Event[] }).events;
    expect(log).toHaveLength(4);
    for (const e of log) expectRetainedFrame(await r.next(`the ${e.type} frame`), e);
    expect(await r.next("the end of the stream")).toBeUndefined();
  });

  it("takes the cursor from Last-Event-ID when after is absent, and a present after wins, also when empty", async () => {
    const s = await createSession();
    const [a, b] = [await sendMessage(s.id, "a"), await sendMessage(s.id, "b")];
    const resumed = sseReader((await open(s.id, "", { "Last-Event-ID": a.cursor! })).body!);
    expectRetainedFrame(await resumed.next("the frame after Last-Event-ID"), b);
    await resumed.cancel();
    const fromStart = sseReader((await open(s.id, "?after=", { "Last-Event-ID": a.cursor! })).body!);
    expectRetainedFrame(await fromStart.next("the first frame"), a);
    await fromStart.cancel();
  });

  it("streams only when text/event-stream is acceptable (q above 0, not below application/json's), and checks limit in both modes", async () => {
    const s = await createSession();
    await sendMessage(s.id, "one event");
    const modes: [string, string][] = [
      ["text/event-stream", "text/event-stream"],
      ["application/json, text/event-stream", "text/event-stream"],
      ["TEXT/Event-Stream; charset=utf-8", "text/event-stream"],
      ["text/event-stream;q=0", "application/json"],
      ["text/event-stream;q=0.5, application/json", "application/json"],
      ["application/json;q=0.5, text/event-stream", "text/event-stream"],
      ["*/*", "application/json"],
      ["text/event-stream;q=1.5", "application/json"],
      ["text/event-stream;q=bogus", "application/json"],
    ];
    for (const [accept, type] of modes) {
      const res = await api(`/sessions/${s.id}/events`, { headers: { Accept: accept } });
      expect(res.status, accept).toBe(200);
      expect(res.headers.get("Content-Type"), accept).toContain(type);
      await res.body?.cancel();
    }
    for (const limit of ["0", "1001", "x", "-1"]) {
      await expectApiError(await open(s.id, `?limit=${limit}`), 400, "invalid_request");
    }
    const ok = await open(s.id, "?limit=1");
    expect(ok.status).toBe(200);
    await ok.body?.cancel();
  });

  it("answers 409 cursor_unavailable for a bad cursor before any stream starts", async () => {
    const s = await createSession();
    const e = await sendMessage(s.id, "a");
    await expectApiError(await open(s.id, `?after=${e.id}`), 409, "cursor_unavailable");
    await expectApiError(await open(s.id, "", { "Last-Event-ID": "nope" }), 409, "cursor_unavailable");
  });

  it("answers 429 overloaded with Retry-After: 1 when limits.subscribers (2) streams are open", async () => {
    const s = await createSession();
    const a = sseReader((await open(s.id)).body!);
    const b = sseReader((await open(s.id)).body!);
    const third = await open(s.id);
    expect(third.headers.get("Retry-After")).toBe("1");
    await expectApiError(third, 429, "overloaded");
    await a.cancel();
    await b.cancel();
  });

  it("replays what is asked on a closed session and then ends the stream", async () => {
    const s = await createSession();
    await sendMessage(s.id, "a");
    expect((await api(`/sessions/${s.id}/close`, { method: "POST" })).status).toBe(202);
    const log = ((await (await api(`/sessions/${s.id}/events`)).json()) as { events: Event[] }).events;
    const r = sseReader((await open(s.id)).body!);
    for (const e of log) expectRetainedFrame(await r.next(`the ${e.type} frame`), e);
    expect(await r.next("the end of the stream")).toBeUndefined();
  });

  it("handles the relay's close of a stream that ended with the session (live), without throwing", async () => {
    const s = await createSession();
    const r = sseReader((await open(s.id)).body!);
    const { handled } = await watchClose(sessionStub(s.id));
    expect((await api(`/sessions/${s.id}/close`, { method: "POST" })).status).toBe(202);
    expect((await r.next("the session.status frame"))?.event).toBe("session.status");
    expect(await r.next("the end of the stream")).toBeUndefined();
    expect(await withTimeout(handled, 5_000, "the object's webSocketClose")).toBe("handled");
  });

  it("handles the relay's close of a replay of a closed session, without throwing", async () => {
    const s = await createSession();
    expect((await api(`/sessions/${s.id}/close`, { method: "POST" })).status).toBe(202);
    const { handled } = await watchClose(sessionStub(s.id));
    const r = sseReader((await open(s.id)).body!);
    expect((await r.next("the session.status frame"))?.event).toBe("session.status");
    expect(await r.next("the end of the stream")).toBeUndefined();
    expect(await withTimeout(handled, 5_000, "the object's webSocketClose")).toBe("handled");
  });
});
