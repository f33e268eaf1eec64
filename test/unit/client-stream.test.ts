/**
 * The typed client's resumable stream (client/stream.ts) against a scripted `fetch`: what it
 * retries, when it gives up, and what it never retries. test/e2e/client.test.ts runs it against
 * the real local stack.
 */
import { describe, expect, it, vi } from "vitest";
import { ApiError, StreamGaveUpError, SvcClient, type SessionEvent } from "../../client/index.ts";

const ID = "a".repeat(32);
type Answer = Response | Error;
const statusEvent = (n: number, status: string) => ({ id: `e${n}`, type: "session.status", time: "2026-01-01T00:00:00Z", cursor: `c${n}`, data: { status } });
const sse = (...frames: string[]) => new Response(frames.join(""), { status: 200, headers: { "Content-Type": "text/event-stream" } });
const frame = (e: { cursor?: string; type: string }) => `${e.cursor ? `id: ${e.cursor}\n` : ""}event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;
const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });

/** A client whose fetch answers stream opens from `opens` in order, and `GET /sessions/{id}` with `status`. */
function scripted(opens: (() => Answer)[], status = "idle") {
  const urls: string[] = [];
  const fetch = (async (input: string | URL | Request) => {
    const url = String(input);
    if (!url.includes("/events")) return json(200, { id: ID, status });
    urls.push(url);
    const next = opens.shift();
    if (!next) throw new Error("no more scripted answers");
    const a = next();
    if (a instanceof Error) throw a;
    return a;
  }) as typeof globalThis.fetch;
  return { svc: new SvcClient({ baseUrl: "http://svc.test", token: "t", fetch }), urls };
}

async function drain(it: AsyncGenerator<SessionEvent>): Promise<SessionEvent[]> {
  const out: SessionEvent[] = [];
  for await (const e of it) out.push(e);
  return out;
}

describe("client stream: reconnects and gives up", () => {
  it("a quiet stream outlives more drops than maxReconnects: only failed connection attempts count", async () => {
    // Five streams that open and end at once with nothing in them, then one that delivers `closed`.
    const opens = [...Array.from({ length: 5 }, () => () => sse(": keepalive\n\n")), () => sse(frame(statusEvent(1, "closed")))];
    const { svc, urls } = scripted(opens);
    const attempts: number[] = [];
    const got = await drain(svc.stream(ID, { maxReconnects: 1, onReconnect: (_, n) => attempts.push(n) }));
    expect(got.map((e) => e.type)).toEqual(["session.status"]);
    expect(urls).toHaveLength(6);
    expect(attempts).toEqual([1, 2, 3, 4, 5]); // streams that drop at once back off, counting up
  });

  it("retries a 5xx or a network error, resetting the count once a stream opens", async () => {
    const opens = [
      () => json(503, { error: { code: "service_error", message: "internal server error" } }),
      () => new TypeError("fetch failed"),
      () => sse(frame(statusEvent(1, "idle"))),
      () => new TypeError("fetch failed"),
      () => json(502, {}),
      () => sse(frame(statusEvent(2, "closed"))),
    ];
    const { svc, urls } = scripted(opens);
    const got = await drain(svc.stream(ID, { maxReconnects: 2 }));
    expect(got.map((e) => e.id)).toEqual(["e1", "e2"]);
    expect(urls.map((u) => new URL(u).searchParams.get("after"))).toEqual(["", "", "", "c1", "c1", "c1"]);
  });

  it("gives up once a failed attempt and maxReconnects retries after it have all failed, with the cursor to resume from and the last failure", async () => {
    const cause = new TypeError("fetch failed");
    // The stream that opened lasts past STEADY_MS (1 s): its drop's reconnect is the first, counting up from there.
    let release!: () => void;
    const steady = new Promise<void>((r) => (release = r));
    const held = () =>
      new Response(
        new ReadableStream({
          async start(c) {
            c.enqueue(new TextEncoder().encode(frame(statusEvent(1, "idle"))));
            await steady;
            c.close();
          },
        }),
        { status: 200, headers: { "Content-Type": "text/event-stream" } },
      );
    const { svc, urls } = scripted([held, ...Array.from({ length: 4 }, () => () => cause)]);
    const attempts: number[] = [];
    vi.useFakeTimers({ toFake: ["Date"] }); // the back-off's waits stay real
    let err: unknown;
    try {
      const it = svc.stream(ID, { maxReconnects: 3, onReconnect: (_, n) => attempts.push(n) });
      const first = await it.next();
      expect(first.value).toMatchObject({ id: "e1" });
      vi.setSystemTime(Date.now() + 1_000);
      release();
      err = await it.next().catch((e: unknown) => e);
    } finally {
      vi.useRealTimers();
    }
    expect(attempts).toEqual([1, 2, 3, 4]);
    expect(err).toBeInstanceOf(StreamGaveUpError);
    expect(err).toMatchObject({ cursor: "c1", cause, message: 'event stream of aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: gave up after 3 reconnects (resume after "c1")' });
    expect(urls).toHaveLength(5); // the first open, then 1 + 3 failed attempts
  });

  it("a frame that holds no JSON event is thrown, not retried as a drop", async () => {
    const { svc, urls } = scripted([() => sse("id: c1\nevent: session.status\ndata: {not json\n\n"), () => sse(frame(statusEvent(2, "closed")))]);
    await expect(drain(svc.stream(ID))).rejects.toThrow(`event stream of ${ID}: a frame (id c1) holds no JSON event`);
    expect(urls).toHaveLength(1);
  });

  it("a 4xx other than 429 is thrown as ApiError at once", async () => {
    const { svc, urls } = scripted([() => json(404, { error: { code: "not_found", message: "no such session" } })]);
    const err = await drain(svc.stream(ID)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 404, code: "not_found" });
    expect(urls).toHaveLength(1);
  });

  it("a 409 cursor_unavailable on a resume starts over from the beginning when onReset is given", async () => {
    const gone = () => json(409, { error: { code: "cursor_unavailable", message: "the cursor is not in this session's log" } });
    const opens = [() => sse(frame(statusEvent(1, "idle")), frame(statusEvent(2, "idle"))), gone, () => sse(frame(statusEvent(1, "idle")), frame(statusEvent(3, "closed")))];
    let resets = 0;
    const { svc, urls } = scripted(opens);
    const got = await drain(svc.stream(ID, { onReset: () => resets++ }));
    expect(resets).toBe(1);
    expect(got.map((e) => e.id)).toEqual(["e1", "e2", "e1", "e3"]);
    expect(urls.map((u) => new URL(u).searchParams.get("after"))).toEqual(["", "c2", ""]);
    // Without onReset the 409 is the caller's.
    const again = scripted([() => sse(frame(statusEvent(1, "idle"))), gone]);
    await expect(drain(again.svc.stream(ID))).rejects.toMatchObject({ status: 409, code: "cursor_unavailable" });
  });
});

describe("client stream: its request and its signal", () => {
  it("a signal aborted before the first event ends the stream without a request", async () => {
    const { svc, urls } = scripted([() => sse(frame(statusEvent(1, "idle")))]);
    const ac = new AbortController();
    ac.abort();
    expect(await drain(svc.stream(ID, { signal: ac.signal }))).toEqual([]);
    expect(urls).toEqual([]);
  });

  it("puts the session id in the path encoded, as every other method does", async () => {
    const { svc, urls } = scripted([() => sse(frame(statusEvent(1, "closed")))]);
    await drain(svc.stream("a/b?c"));
    expect(new URL(urls[0]!).pathname).toBe("/sessions/a%2Fb%3Fc/events");
  });

  it("refuses a baseUrl with a query or fragment, which would swallow every path", () => {
    for (const baseUrl of ["http://svc.test/?x=1", "http://svc.test#f", "svc.test", "ftp://svc.test"]) {
      expect(() => new SvcClient({ baseUrl })).toThrow(/baseUrl must be an http\(s\) URL without a query or fragment/);
    }
    expect(() => new SvcClient({ baseUrl: "https://svc.test/agents/" })).not.toThrow();
  });
});
