/**
 * The reference harness hands a provider's event stream to its SDK in pieces of about a kilobyte
 * (runner-host/reference-harness/event-pieces.ts, relayed by stream-end.ts): the SDKs' per-read
 * work grows with the square of a read's size, and one network read holds up to 64 KiB.
 */
import { describe, expect, it } from "vitest";
import { PIECE_BYTES, pieces } from "../../runner-host/reference-harness/event-pieces.ts";
import { watchedFetch } from "../../runner-host/reference-harness/stream-end.ts";

const enc = new TextEncoder();
const chunk = (delta: object, finish: string | null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "gpt-4o-mini", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const event = (i: number) => chunk({ content: String(i % 10).repeat(4) }, null);
/** One network read of `n` events, ~150 bytes each, as a fast provider's stream arrives. */
const read = (n: number, last = "") => enc.encode(Array.from({ length: n }, (_, i) => event(i)).join("") + last);
const DONE = `${chunk({}, "stop")}data: [DONE]\n\n`;

function join(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) (out.set(p, at), (at += p.length));
  return out;
}

/** Everything a fetch answer's body gives, read by read. */
async function reads(res: Response): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  const reader = res.body!.getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) out.push(r.value);
  return out;
}

/** A fetch that answers every request with `body` as a single read. */
const oneRead = (body: Uint8Array, type = "text/event-stream") => (async () =>
  new Response(new ReadableStream({ start: (c) => (c.enqueue(body), c.close()) }), { status: 200, headers: { "content-type": type } })) as unknown as typeof fetch;

describe("a provider's event stream in pieces", () => {
  it("cuts a 64 KiB read after the first line end past each kilobyte: views of the read that together are the read", () => {
    const chunk = read(400);
    expect(chunk.length).toBeGreaterThan(64 * 1024);
    const out = [...pieces(chunk)];
    expect(join(out)).toEqual(chunk);
    expect(out.length).toBeGreaterThan(50);
    for (const p of out) {
      expect(p.buffer).toBe(chunk.buffer); // no copy
      expect(p.at(-1)).toBe(10);
    }
    for (const p of out.slice(0, -1)) {
      expect(p.length).toBeGreaterThanOrEqual(PIECE_BYTES);
      expect(p.length).toBeLessThan(PIECE_BYTES + 200); // at most one event's line past the kilobyte
    }
  });

  it("leaves a read of one kilobyte or less, and a line longer than a piece, whole; an empty read gives nothing", () => {
    const small = read(5);
    expect([...pieces(small)]).toEqual([small]);
    const long = enc.encode(`data: ${"x".repeat(10_000)}\n\n`);
    expect([...pieces(long)].map((p) => p.length)).toEqual([10_007, 1]); // cut at the line's end, not inside it
    const noLineEnd = enc.encode("y".repeat(5_000));
    expect([...pieces(noLineEnd)]).toEqual([noLineEnd]);
    expect([...pieces(new Uint8Array(0))]).toEqual([]);
  });

  it("the harness's fetch relays a Chat Completions stream that came in one read in pieces, byte for byte", async () => {
    const body = read(350, DONE);
    const got = await reads(await watchedFetch(oneRead(body))("http://provider.test/v1/chat/completions", { method: "POST" }));
    expect(join(got)).toEqual(body);
    expect(got.length).toBeGreaterThan(50);
    expect(Math.max(...got.map((p) => p.length))).toBeLessThan(PIECE_BYTES + 200);
  });

  it("relays any other API's event stream in pieces too, and an answer that is no event stream as it came", async () => {
    const body = read(350);
    const stream = await reads(await watchedFetch(oneRead(body))("http://provider.test/v1/messages", { method: "POST" }));
    expect(join(stream)).toEqual(body);
    expect(stream.length).toBeGreaterThan(50);
    const json = enc.encode(JSON.stringify({ data: "x".repeat(70_000) }));
    const whole = await reads(await watchedFetch(oneRead(json, "application/json"))("http://provider.test/v1/models"));
    expect(whole).toEqual([json]);
  });
});
