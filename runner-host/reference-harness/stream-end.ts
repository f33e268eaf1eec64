/**
 * The fetch provider clients use: every successful event-stream answer is relayed to the SDK in
 * pieces of whole lines (./event-pieces.ts: so the SDK's per-read cost stays linear), and a Chat
 * Completions stream is watched for its end.
 *
 * A Chat Completions stream counts as finished only when a choice said why it finished. pi-ai
 * starts every reply as `stop` and the OpenAI SDK ends quietly when the event stream does, so a
 * stream cut short (a proxy closing the connection cleanly, a server dying between chunks) would
 * be recorded as a whole, completed reply. The relay watches such streams for a non-null
 * `finish_reason` and, at an end without one, fails the body: the SDK then throws, pi records a
 * provider error, and the turn ends `provider_error` as for a connection cut mid-chunk.
 *
 * Only answers to `…/chat/completions` are watched (other APIs end their streams with an event
 * pi-ai checks itself), and a 200 there that is no event stream fails the same way. The scan
 * looks at each network read's bytes once and stops looking once the reason was seen.
 */
import { setImmediate as loopTurn } from "node:timers/promises";
import { concatBytes } from "../../src/shared/bytes.ts";
import { LinePieces } from "./event-pieces.ts";
import { httpFetch, located } from "../http-fetch.ts";

/** Bytes of one read kept for the next, so a `"finish_reason": "` split between two is found. */
const TAIL_BYTES = 64;
const KEY = Buffer.from('"finish_reason"');
const COLON = 0x3a;
const QUOTE = 0x22;
/**
 * Pieces handed on without a turn of the event loop, at most: ~32 KiB, the longest gap between two
 * turns of a long reply ~10–26 ms. 8 made it 6–10 ms but four times the stdout lines (one line
 * each for the runner-host to parse: +1.3 ms of its CPU per 1,000 deltas); bench/RESULTS.md
 * "Eleventh session".
 */
const PIECES_PER_TURN = 32;
const isJsonSpace = (b: number | undefined) => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;

export const CUT_SHORT = "the provider's stream ended before the reply finished (no finish_reason)";

/**
 * The fetch the harness installs for its provider clients: requests over Node's own HTTP client
 * (../http-fetch.ts, `builtin` for what it does not take), answers relayed by `watchedFetch`. The
 * benchmarks' library column installs the same, so both run one client.
 */
export function harnessFetch(builtin: typeof fetch): typeof fetch {
  return watchedFetch(httpFetch(builtin));
}

export function watchedFetch(inner: typeof fetch): typeof fetch {
  return async (input, init) => {
    const res = await inner(input, init);
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!res.ok || !res.body) return res;
    const chat = new URL(url).pathname.endsWith("/chat/completions");
    const type = res.headers.get("content-type") ?? "";
    const stream = type.toLowerCase().startsWith("text/event-stream");
    if (!chat && !stream) return res;
    // The harness always asks for a stream: a 200 of anything else (a captive portal's page, a
    // whole JSON reply) would be read as an empty stream, an empty reply.
    const body = stream ? relayed(res.body, chat) : failed(res.body, `the provider answered 200 with ${JSON.stringify(type.slice(0, 64))}, not an event stream`);
    return located(new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers }), res.url, res.redirected);
  };
}

function failed(body: ReadableStream<Uint8Array>, message: string): ReadableStream<Uint8Array> {
  void body.cancel().catch(() => {}); // nothing of it is read
  return new ReadableStream<Uint8Array>({ start: (controller) => controller.error(new Error(message)) });
}

/**
 * `body` in pieces; with `watchFinish`, an end before a `finish_reason` fails it. Once
 * PIECES_PER_TURN pieces went on with no turn of the event loop between them, the next waits for
 * one.
 *
 * The loop turns: a stream that arrives faster than the SDK parses it waits queued in the body, and
 * a queued read resolves as a microtask, so the SDK went on read after read without the loop ever
 * turning — one long reply held it for 67–265 ms at a time (measured in a Node running the
 * harness's libraries), while stdin (an `interrupt`), the other sessions' output and every timer
 * waited. A turn per network read still left 14–33 ms (a read is up to 64 KiB). A stream read as
 * it arrives (every short reply) sees the loop turn by itself and never waits for one: waiting
 * before every read but the first made 50 sessions' turns ~6% fewer per second.
 */
function relayed(body: ReadableStream<Uint8Array>, watchFinish: boolean): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let tail = new Uint8Array(0);
  let finished = !watchFinish;
  const lines = new LinePieces();
  let rest: Iterator<Uint8Array> | undefined; // the pieces of the current read not handed on yet
  let sinceTurn = 0; // pieces handed on since the event loop last turned
  let watching = false;
  const turned = () => {
    sinceTurn = 0;
    watching = false;
  };
  /** The next network read as pieces; undefined once the body ended or failed (the stream is closed or errored). */
  const nextRead = async (controller: ReadableStreamDefaultController<Uint8Array>): Promise<Iterator<Uint8Array> | undefined> => {
    let chunk: Awaited<ReturnType<typeof reader.read>>;
    try {
      chunk = await reader.read();
    } catch (err) {
      controller.error(err);
      return undefined;
    }
    if (chunk.done) {
      const unended = lines.end();
      if (unended) controller.enqueue(unended);
      if (finished) controller.close();
      else controller.error(new Error(CUT_SHORT));
      return undefined;
    }
    if (!finished) {
      const read = chunk.value;
      finished = (tail.length > 0 && hasReason(concatBytes([tail, read.subarray(0, TAIL_BYTES)]))) || hasReason(read);
      tail = read.slice(-TAIL_BYTES);
    }
    return lines.push(chunk.value);
  };
  return new ReadableStream<Uint8Array>({
    // A pull ends with a piece handed on, or the stream closed or failed: the stream asks again
    // only after a piece (a pull that handed on nothing would leave the SDK waiting forever).
    async pull(controller) {
      // The watch was queued first, so it has run (and reset the count) when this wait ends.
      if (sinceTurn >= PIECES_PER_TURN) await loopTurn();
      for (;;) {
        rest ??= await nextRead(controller);
        if (!rest) return;
        if (!watching) {
          watching = true;
          setImmediate(turned);
        }
        const before = sinceTurn;
        while (sinceTurn < PIECES_PER_TURN) {
          const next = rest.next();
          if (next.done) {
            rest = undefined;
            break;
          }
          controller.enqueue(next.value);
          sinceTurn++;
        }
        if (sinceTurn > before) return;
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

/**
 * Whether `bytes` hold `"finish_reason"`, a colon and an opening quote (a string value: a reason),
 * JSON whitespace between. Bytes, not decoded text: decoding every read only to look for this
 * made the relay allocate ~400 bytes per delta of a long turn, ~90 without (a sampled heap
 * profile), and the harness's young generation is small (docs/configuration.md).
 */
function hasReason(bytes: Uint8Array): boolean {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = buf.indexOf(KEY); at !== -1; at = buf.indexOf(KEY, at + KEY.length)) {
    let i = at + KEY.length;
    while (isJsonSpace(buf[i])) i++;
    if (buf[i++] !== COLON) continue;
    while (isJsonSpace(buf[i])) i++;
    if (buf[i] === QUOTE) return true;
  }
  return false;
}
