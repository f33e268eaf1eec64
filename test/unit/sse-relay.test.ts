/**
 * The Worker's SSE relay (docs/api.md "SSE": keepalive, write deadline and subscriber
 * budgets), driven with a fake SessionObject stub whose subscribe socket is an EventTarget.
 * Node's Response refuses status 101, so the stub answers with a Response-like object.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Event } from "../../src/shared/api-schema.ts";
import { ServiceError } from "../../src/shared/errors.ts";
import type { SubscribeDown } from "../../src/shared/subscribe-protocol.ts";
import { encodeEvent } from "../../src/sse/frame.ts";
import { KEEPALIVE_MS, WRITE_DEADLINE_MS } from "../../src/sse/stream-rules.ts";
import { EVENT_OVERHEAD_BYTES, openSessionStream, type StreamHooks } from "../../src/sse/session-stream.ts";
import { OpenStreams } from "../../src/streams/open-streams.ts";

const decoder = new TextDecoder();

class FakeSocket extends EventTarget {
  accepted = false;
  sent: string[] = [];
  closedWith: { code?: number; reason?: string } | undefined;
  #sendWaiters: ((m: string) => void)[] = [];
  #closeWaiters: (() => void)[] = [];

  accept() {
    this.accepted = true;
  }
  send(m: string) {
    this.sent.push(m);
    this.#sendWaiters.shift()?.(m);
  }
  close(code?: number, reason?: string) {
    this.closedWith ??= { code, reason };
    for (const w of this.#closeWaiters.splice(0)) w();
  }
  /** The object sends a message down the socket. */
  push(m: SubscribeDown) {
    this.dispatchEvent(new MessageEvent("message", { data: JSON.stringify(m) }));
  }
  /** The object closed its end. */
  closeFromObject() {
    this.dispatchEvent(new Event("close"));
  }
  nextSend(): Promise<string> {
    return withTimeout(new Promise((resolve) => this.#sendWaiters.push(resolve)), "a message from the relay");
  }
  closed(): Promise<void> {
    if (this.closedWith) return Promise.resolve();
    return withTimeout(new Promise((resolve) => this.#closeWaiters.push(resolve)), "the relay to close the socket");
  }
}

/** Real timers, captured before any test fakes them: waits time out on the wall clock. */
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;

function withTimeout<T>(p: Promise<T>, what: string, ms = 2_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = realSetTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  return Promise.race([p, t]).finally(() => realClearTimeout(timer));
}

type Opened = {
  ws: FakeSocket;
  res: Response;
  reader: ReadableStreamDefaultReader<Uint8Array>;
  requests: { url: string; init?: RequestInit }[];
  abort: AbortController;
  /** The next frame the client takes, as text. */
  read(): Promise<string>;
};

async function open(budget = { events: 2, bytes: 4096 }, cursor = "", hooks?: StreamHooks): Promise<Opened> {
  const ws = new FakeSocket();
  const requests: { url: string; init?: RequestInit }[] = [];
  const stub = {
    fetch: async (url: string, init?: RequestInit) => {
      requests.push({ url, init });
      return { status: 101, webSocket: ws, json: async () => ({}) } as unknown as Response;
    },
  };
  const abort = new AbortController();
  const res = await openSessionStream(stub, cursor, budget, abort.signal, undefined, hooks);
  const reader = res.body!.getReader();
  return {
    ws,
    res,
    reader,
    requests,
    abort,
    async read() {
      const { done, value } = await withTimeout(reader.read(), "a frame");
      if (done) throw new Error("the stream ended");
      return decoder.decode(value);
    },
  };
}

let n = 0;
/** A retained event whose JSON envelope (the `data:` payload) is `dataLength` bytes. */
function eventOfDataLength(dataLength: number, retained = true): Event {
  const id = (++n).toString(16).padStart(32, "0");
  const base: Event = { id, type: retained ? "assistant.message" : "assistant.delta", time: "2026-01-01T00:00:00.000Z", data: { text: "" } };
  if (retained) base.cursor = `cursor${id}`;
  const room = dataLength - JSON.stringify(base).length;
  if (room < 0) throw new Error(`${dataLength} is too small`);
  base.data = { text: "x".repeat(room) };
  expect(encodeEvent(base).dataLength).toBe(dataLength);
  return base;
}

const ev = (retained = true) => eventOfDataLength(200, retained);

const frameOf = (e: Event) => decoder.decode(encodeEvent(e).bytes);

afterEach(() => {
  vi.useRealTimers();
});

describe("SSE relay: subscribe handshake", () => {
  it("asks the object for /subscribe with the cursor, accepts the socket and sends more at once", async () => {
    const o = await open(undefined, "abc_-123");
    expect(o.requests).toHaveLength(1);
    expect(o.requests[0]!.url).toBe("https://session/subscribe?after=abc_-123");
    expect(new Headers(o.requests[0]!.init?.headers).get("Upgrade")).toBe("websocket");
    expect(o.ws.accepted).toBe(true);
    expect(o.ws.sent).toEqual(["more"]);
    expect(o.res.status).toBe(200);
    expect(o.res.headers.get("Content-Type")).toBe("text/event-stream");
    expect(o.res.headers.get("Cache-Control")).toBe("no-store");
  });

  it("turns a refused subscribe into the object's typed error (429 overloaded keeps Retry-After: 1)", async () => {
    const refuse = (status: number, body: unknown) => ({
      fetch: async () => ({ status, webSocket: null, json: async () => body }) as unknown as Response,
    });
    const busy = openSessionStream(refuse(429, { code: "overloaded", message: "full" }), "", { events: 2, bytes: 4096 }, new AbortController().signal);
    await expect(busy).rejects.toBeInstanceOf(ServiceError);
    await expect(busy).rejects.toMatchObject({ code: "overloaded", status: 429, headers: { "Retry-After": "1" } });
    const gone = openSessionStream(refuse(409, { code: "cursor_unavailable", message: "no" }), "x", { events: 2, bytes: 4096 }, new AbortController().signal);
    await expect(gone).rejects.toMatchObject({ code: "cursor_unavailable", status: 409 });
  });
});

describe("SSE relay: replay and live", () => {
  it("writes each replay batch as one write, asks for the next while writing it, and stops asking when the object goes live", async () => {
    const o = await open();
    const batch = [ev(), ev(), ev()];
    const asked = o.ws.nextSend();
    o.ws.push({ t: "replay", events: batch, live: false });
    expect(await asked).toBe("more");
    expect(await o.read()).toBe(batch.map(frameOf).join(""));
    const last = [ev()];
    o.ws.push({ t: "replay", events: last, live: true });
    expect(await o.read()).toBe(frameOf(last[0]!));
    const live = ev(false);
    o.ws.push({ t: "live", events: [live] });
    expect(await o.read()).toBe(frameOf(live));
    expect(o.ws.sent).toEqual(["more", "more"]);
    expect(o.ws.closedWith).toBeUndefined();
  });

  it("ends the stream after the queued frames when the object sends end", async () => {
    const o = await open();
    const e = ev();
    o.ws.push({ t: "replay", events: [], live: true });
    o.ws.push({ t: "live", events: [e] });
    o.ws.push({ t: "end" });
    expect(await o.read()).toBe(frameOf(e));
    expect(await withTimeout(o.reader.read(), "the end")).toEqual({ done: true, value: undefined });
    expect(o.ws.closedWith?.code).toBe(1000);
  });

  it("ends the stream when the object closes the socket", async () => {
    const o = await open();
    o.ws.closeFromObject();
    expect(await withTimeout(o.reader.read(), "the end")).toEqual({ done: true, value: undefined });
  });

  it("closes the socket when the client goes away (the body is cancelled) or the request is aborted", async () => {
    const a = await open();
    await a.reader.cancel();
    await a.ws.closed();
    expect(a.ws.closedWith?.code).toBe(1000);

    const b = await open();
    b.abort.abort();
    await b.ws.closed();
    await expect(withTimeout(b.reader.read(), "the error")).rejects.toThrow("subscriber disconnected");
  });
});

describe("SSE relay: subscriber budgets (limits.subscriber_events, limits.subscriber_bytes)", () => {
  it("disconnects a client that does not read once more than subscriber_events live events wait behind the one being written", async () => {
    const o = await open({ events: 2, bytes: 1_000_000 });
    o.ws.push({ t: "replay", events: [], live: true });
    o.ws.push({ t: "live", events: [ev()] }); // being written: not counted
    o.ws.push({ t: "live", events: [ev()] });
    o.ws.push({ t: "live", events: [ev(false)] });
    expect(o.ws.closedWith).toBeUndefined(); // two behind: at the limit, not over it
    o.ws.push({ t: "live", events: [ev()] });
    await o.ws.closed();
    await expect(withTimeout(o.reader.read(), "the error")).rejects.toThrow("subscriber disconnected");
  });

  it("disconnects a client that does not read once the live events behind the one being written count more than subscriber_bytes (data length + 256 each)", async () => {
    const o = await open({ events: 128, bytes: 4096 });
    o.ws.push({ t: "replay", events: [], live: true });
    o.ws.push({ t: "live", events: [eventOfDataLength(50_000)] }); // being written: not counted
    // 2048 + 2048 = 4096 behind: exactly the budget.
    o.ws.push({ t: "live", events: [eventOfDataLength(2048 - EVENT_OVERHEAD_BYTES)] });
    o.ws.push({ t: "live", events: [eventOfDataLength(2048 - EVENT_OVERHEAD_BYTES, false)] });
    expect(o.ws.closedWith).toBeUndefined();
    o.ws.push({ t: "live", events: [eventOfDataLength(200)] });
    await o.ws.closed();
    await expect(withTimeout(o.reader.read(), "the error")).rejects.toThrow("subscriber disconnected");
  });

  it("never counts replay batches, however many wait unread", async () => {
    const o = await open({ events: 2, bytes: 4096 });
    o.ws.push({ t: "replay", events: Array.from({ length: 100 }, () => ev()), live: false });
    o.ws.push({ t: "replay", events: Array.from({ length: 50 }, () => eventOfDataLength(5000)), live: true });
    o.ws.push({ t: "live", events: [ev()] });
    o.ws.push({ t: "live", events: [ev()] });
    expect(o.ws.closedWith).toBeUndefined();
    // A third live event behind the replay is over the budget.
    o.ws.push({ t: "live", events: [ev()] });
    await o.ws.closed();
  });

  it("does not count the event being written: a single event larger than subscriber_bytes reaches the client", async () => {
    const o = await open({ events: 2, bytes: 4096 });
    o.ws.push({ t: "replay", events: [], live: true });
    const big = eventOfDataLength(100_000);
    o.ws.push({ t: "live", events: [big] });
    expect(o.ws.closedWith).toBeUndefined();
    expect(await o.read()).toBe(frameOf(big));
    const small = ev();
    o.ws.push({ t: "live", events: [small] });
    expect(await o.read()).toBe(frameOf(small));
    expect(o.ws.closedWith).toBeUndefined();
  });

  it("never cuts a reading client, whatever the number and size of live events", async () => {
    const o = await open({ events: 2, bytes: 4096 });
    o.ws.push({ t: "replay", events: [], live: true });
    for (let i = 0; i < 50; i++) {
      const e = i % 5 === 0 ? eventOfDataLength(20_000) : ev(i % 2 === 0);
      o.ws.push({ t: "live", events: [e] });
      expect(await o.read()).toBe(frameOf(e));
    }
    expect(o.ws.closedWith).toBeUndefined();
  });

  it("lets a reading client take a burst of more live events than subscriber_events published together", async () => {
    // Closing a session with three queued inputs publishes four events in one message.
    const o = await open({ events: 2, bytes: 1_000_000 });
    o.ws.push({ t: "replay", events: [], live: true });
    const reads = [o.read(), o.read(), o.read(), o.read()];
    const burst = [ev(), ev(), ev(), ev()];
    o.ws.push({ t: "live", events: burst });
    expect(await Promise.all(reads)).toEqual(burst.map(frameOf));
    expect(o.ws.closedWith).toBeUndefined();
  });
});

describe("SSE relay: queued assistant.delta frames of one turn are merged", () => {
  const delta = (text: string, input = "a".repeat(32)): Event => ({
    id: (++n).toString(16).padStart(32, "0"),
    type: "assistant.delta",
    time: "2026-01-01T00:00:00.000Z",
    data: { text },
    input_id: input,
  });

  it("merges 128 large deltas queued behind the frame being written into one frame, losslessly, so the reader is not cut", async () => {
    const o = await open({ events: 64, bytes: 8 * 1024 * 1024 });
    o.ws.push({ t: "replay", events: [], live: true });
    const deltas = Array.from({ length: 129 }, (_, i) => delta(`${i}:${"d".repeat(16_000)}"\\é\n`));
    for (const d of deltas) o.ws.push({ t: "live", events: [d] });
    expect(o.ws.closedWith).toBeUndefined();
    // The first was being written; the other 128 waited as one frame.
    expect(await o.read()).toBe(frameOf(deltas[0]!));
    const merged = { ...deltas[1]!, data: { text: deltas.slice(1).map((d) => d.data.text).join("") } };
    let text = "";
    while (!text.endsWith("\n\n")) text += await o.read();
    expect(text).toBe(frameOf(merged));
    expect(o.ws.closedWith).toBeUndefined();
  });

  it("keeps other events, other turns and the frame being written apart, in order", async () => {
    const o = await open({ events: 64, bytes: 1_000_000 });
    o.ws.push({ t: "replay", events: [], live: true });
    const [a1, a2, a3] = [delta("a1"), delta("a2"), delta("a3")];
    const msg = ev();
    const [a4, b1, b2] = [delta("a4"), delta("b1", "b".repeat(32)), delta("b2", "b".repeat(32))];
    for (const e of [a1, a2, a3, msg, a4, b1, b2]) o.ws.push({ t: "live", events: [e] });
    const expected = [
      frameOf(a1),
      frameOf({ ...a2, data: { text: "a2a3" } }),
      frameOf(msg),
      frameOf(a4),
      frameOf({ ...b1, data: { text: "b1b2" } }),
    ];
    let text = "";
    while (text.length < expected.join("").length) text += await o.read();
    expect(text).toBe(expected.join(""));
  });

  it("still cuts a reader that falls behind: the merged frame counts its whole text against subscriber_bytes", async () => {
    const o = await open({ events: 64, bytes: 64 * 1024 });
    o.ws.push({ t: "replay", events: [], live: true });
    o.ws.push({ t: "live", events: [delta("first")] }); // being written, never read
    for (let i = 0; i < 8; i++) o.ws.push({ t: "live", events: [delta("x".repeat(10_000))] });
    o.ws.push({ t: "live", events: [ev()] }); // 80 KB of merged deltas queued: over 64 KiB
    await o.ws.closed();
    await expect(withTimeout(o.reader.read(), "the error")).rejects.toThrow("subscriber disconnected");
  });
});

describe("SSE relay: keepalive and write deadline (15 s each)", () => {
  it("writes : keepalive after 15 s idle, and only while idle", async () => {
    vi.useFakeTimers();
    const o = await open();
    o.ws.push({ t: "replay", events: [], live: true });
    let next = o.read();
    await vi.advanceTimersByTimeAsync(KEEPALIVE_MS - 1_000);
    const e = ev();
    o.ws.push({ t: "live", events: [e] }); // t = 14 s: the stream is not idle
    expect(await next).toBe(frameOf(e));
    next = o.read();
    let got: string | undefined;
    void next.then((f) => (got = f));
    await vi.advanceTimersByTimeAsync(KEEPALIVE_MS - 1_000); // t = 28 s: 14 s since the event
    expect(got).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1_000); // t = 29 s: 15 s since the event
    expect(await next).toBe(": keepalive\n\n");
    const again = o.read();
    await vi.advanceTimersByTimeAsync(KEEPALIVE_MS);
    expect(await again).toBe(": keepalive\n\n");
    expect(o.ws.closedWith).toBeUndefined();
  });

  it("disconnects when a frame stays unwritten for 15 s", async () => {
    vi.useFakeTimers();
    const o = await open({ events: 128, bytes: 2_097_152 });
    o.ws.push({ t: "replay", events: [], live: true });
    o.ws.push({ t: "live", events: [ev()] });
    await vi.advanceTimersByTimeAsync(WRITE_DEADLINE_MS - 1_000);
    expect(o.ws.closedWith).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(o.ws.closedWith?.code).toBe(1000);
    await expect(o.reader.read()).rejects.toThrow("subscriber disconnected");
  });

  it("disconnects a client that takes no keepalive for 15 s", async () => {
    vi.useFakeTimers();
    const o = await open();
    o.ws.push({ t: "replay", events: [], live: true });
    await vi.advanceTimersByTimeAsync(KEEPALIVE_MS); // keepalive queued, never read
    expect(o.ws.closedWith).toBeUndefined();
    await vi.advanceTimersByTimeAsync(WRITE_DEADLINE_MS);
    expect(o.ws.closedWith?.code).toBe(1000);
  });

  it("does not cut a client that keeps taking frames (one a second) for longer than the write deadline", async () => {
    vi.useFakeTimers();
    const o = await open();
    const events = Array.from({ length: 30 }, () => ev());
    for (const [i, e] of events.entries()) {
      o.ws.push({ t: "replay", events: [e], live: i === events.length - 1 });
      await vi.advanceTimersByTimeAsync(1_000);
      expect(o.ws.closedWith, `cut before ${i + 1} frames`).toBeUndefined();
      expect(await o.read()).toBe(frameOf(e));
    }
    expect(o.ws.closedWith).toBeUndefined();
  });
});

describe("SSE relay: shutdown ends open streams", () => {
  const live: SubscribeDown = { t: "replay", events: [], live: true };

  it("asks the object to end, writes what the object sent before its end, and counts the stream ended once its last byte was taken", async () => {
    const streams = new OpenStreams();
    const o = await open(undefined, "", { track: (s) => streams.add(s) });
    o.ws.push(live);
    expect(streams.size).toBe(1);
    const ending = streams.endAll(2_000);
    expect(streams.closing).toBe(true);
    expect(o.ws.sent).toEqual(["more", "end"]);
    // The object's answer: the events it published before the request, then `end`.
    const last = [ev(), ev()];
    o.ws.push({ t: "live", events: last });
    o.ws.push({ t: "end" });
    expect((await o.read()) + (await o.read())).toBe(last.map(frameOf).join(""));
    expect(await withTimeout(o.reader.read(), "the end")).toEqual({ done: true, value: undefined });
    expect(await withTimeout(ending, "the shutdown's answer")).toEqual({ ended: 1, cut: 0 });
    expect(streams.size).toBe(0);
  });

  it("cuts a stream whose client does not take its last events within the bound; the others still end cleanly", async () => {
    const streams = new OpenStreams();
    const reading = await open(undefined, "", { track: (s) => streams.add(s) });
    const stuck = await open(undefined, "", { track: (s) => streams.add(s) });
    reading.ws.push(live);
    stuck.ws.push(live);
    const ending = streams.endAll(300);
    reading.ws.push({ t: "end" });
    stuck.ws.push({ t: "live", events: [ev()] });
    stuck.ws.push({ t: "end" });
    expect(await withTimeout(reading.reader.read(), "the end")).toEqual({ done: true, value: undefined });
    expect(await withTimeout(ending, "the shutdown's answer")).toEqual({ ended: 1, cut: 1 });
    await expect(withTimeout(stuck.reader.read(), "the error")).rejects.toThrow("subscriber disconnected");
  });
});
