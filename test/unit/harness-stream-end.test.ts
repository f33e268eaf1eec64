/**
 * The reference harness's fetch (runner-host/reference-harness/stream-end.ts): a Chat Completions
 * stream counts as finished only once a choice gave a `finish_reason`, wherever the network cut
 * the reads (the turn-level behaviour, a cut stream ending the turn `provider_error`, is in
 * harness-turns.test.ts); and a stream that came faster than it is read does not hold the event
 * loop while it is read.
 */
import { describe, expect, it } from "vitest";
import { CUT_SHORT, watchedFetch } from "../../runner-host/reference-harness/stream-end.ts";

const enc = new TextEncoder();
const event = (finish: string) => `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"},${finish}}]}\n\n`;

/** A fetch answering with `reads` as the event stream's network reads. */
const answering = (reads: string[]) => (async () =>
  new Response(new ReadableStream({ start: (c) => (reads.forEach((r) => c.enqueue(enc.encode(r))), c.close()) }), { status: 200, headers: { "content-type": "text/event-stream" } })) as unknown as typeof fetch;

/** How reading the whole relayed stream ends: "finished", or the error it fails with. */
async function ending(reads: string[]): Promise<string> {
  const res = await watchedFetch(answering(reads))("http://provider.test/v1/chat/completions", { method: "POST" });
  const reader = res.body!.getReader();
  try {
    while (!(await reader.read()).done);
    return "finished";
  } catch (err) {
    return (err as Error).message;
  }
}

describe("the harness's finish watch on a Chat Completions stream", () => {
  it("finds a reason split between two reads at any byte", async () => {
    const stream = event('"finish_reason":null').repeat(3) + event('"finish_reason":"stop"') + "data: [DONE]\n\n";
    const at = stream.lastIndexOf('"finish_reason"');
    for (let cut = at - 2; cut <= at + 26; cut++) {
      expect([cut, await ending([stream.slice(0, cut), stream.slice(cut)])]).toEqual([cut, "finished"]);
    }
  });

  it("takes JSON whitespace around the colon, and only a string value as a reason", async () => {
    expect(await ending([event('"finish_reason" :\t"length"')])).toBe("finished");
    expect(await ending([event('"finish_reason" : null'), event('"finish_reason":null'), "data: [DONE]\n\n"])).toBe(CUT_SHORT);
    expect(await ending([event('"finish_reason_note":"x"')])).toBe(CUT_SHORT);
  });
});

describe("the harness's relayed answer", () => {
  it("keeps the status, headers, final URL and redirected flag of the answer it relays", async () => {
    const inner = (async () => {
      const res = new Response("data: {}\n\n", { status: 200, statusText: "Fine", headers: { "content-type": "text/event-stream", "x-request-id": "r1" } });
      return Object.defineProperties(res, { url: { value: "http://provider.test/v2/messages" }, redirected: { value: true } });
    }) as unknown as typeof fetch;
    const res = await watchedFetch(inner)("http://provider.test/v1/messages", { method: "POST" });
    expect([res.status, res.statusText, res.headers.get("x-request-id"), res.url, res.redirected]).toEqual([200, "Fine", "r1", "http://provider.test/v2/messages", true]);
    expect(await res.text()).toBe("data: {}\n\n");
  });
});

describe("the harness's fetch and the event loop", () => {
  it("a long reply already received is handed on with turns of the event loop between its pieces (stdin, timers, other sessions' output go on)", async () => {
    // Three 64 KiB reads, all queued before the SDK reads any: a fast provider and a busy harness.
    const read = event('"finish_reason":null').repeat(420);
    const res = await watchedFetch(answering([read, read, read + event('"finish_reason":"stop"')]))("http://provider.test/v1/chat/completions", { method: "POST" });
    const reader = res.body!.getReader();
    let pieces = 0;
    let loopTurns = 0;
    let counting = true;
    const count = () => {
      loopTurns++;
      if (counting) setImmediate(count);
    };
    setImmediate(count);
    while (!(await reader.read()).done) pieces++;
    counting = false;
    expect(pieces).toBeGreaterThan(120);
    // A turn before every 32 pieces but the first 32 (reads resolve as microtasks: without them, none).
    expect(loopTurns).toBeGreaterThanOrEqual(Math.floor(pieces / 32) - 1);
    expect(loopTurns).toBeGreaterThan(0);
  });
});

/** Everything the relay hands on for `reads` of a non-chat event stream, or a rejection after `ms` (a stalled relay). */
async function relayedReads(reads: string[], ms = 5_000): Promise<Uint8Array[]> {
  const res = await watchedFetch(answering(reads))("http://provider.test/v1/messages", { method: "POST" });
  const reader = res.body!.getReader();
  const out: Uint8Array[] = [];
  const all = (async () => {
    for (let r = await reader.read(); !r.done; r = await reader.read()) out.push(r.value);
    return out;
  })();
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`the relay stalled after ${out.length} pieces`)), ms)));
  try {
    return await Promise.race([all, stalled]);
  } finally {
    clearTimeout(timer);
  }
}

describe("the harness's fetch never stalls a stream", () => {
  const text = (parts: Uint8Array[]) => new TextDecoder().decode(Buffer.concat(parts));

  it("an event longer than a read waits for the read that ends it and goes on whole; the stream goes on after it", async () => {
    const long = `data: ${"x".repeat(100_000)}`;
    const reads = [long.slice(0, 60_000), long.slice(60_000), "\n\n", "data: after\n\n"];
    const got = await relayedReads(reads);
    expect(text(got)).toBe(reads.join(""));
    expect(got[0]!.length).toBe(long.length + 1); // the line, joined once, with its line end
  });

  it("what no line end followed is handed on when the stream ends", async () => {
    expect(text(await relayedReads(["data: a\n\n", "data: unended"]))).toBe("data: a\n\ndata: unended");
  });
});
