/**
 * The Worker end of an SSE stream (docs/architecture.md "The parts"): one hibernatable socket to the
 * SessionObject per client, frames written to the client here, where its backlog is visible.
 *
 * Budgets (docs/api.md "SSE"): live events written but not yet taken by the
 * client count as their data length + 256 bytes; the event being written is not counted. Going over
 * `subscriber_events` or `subscriber_bytes`, or a frame unwritten for 15 s, disconnects this client
 * only. Replay is pulled batch by batch (`more` once a batch is written), so it never piles up.
 *
 * Consecutive `assistant.delta` events of one turn that are still queued for a client are merged
 * into one frame (texts concatenated, the first delta's id and time kept): a burst of deltas costs
 * a reading client one queued event, so only a client that really falls behind is cut.
 */
import { END, MORE, type SubscribeDown } from "../shared/subscribe-protocol.ts";
import type { Event } from "../shared/api-schema.ts";
import { concatBytes } from "../shared/bytes.ts";
import type { EndableStream } from "../streams/open-streams.ts";
import { encodeEvent, KEEPALIVE } from "./frame.ts";
import { CUT_REASON, KEEPALIVE_MS, SSE_HEADERS, STREAM_CHECK_MS, WRITE_DEADLINE_MS } from "./stream-rules.ts";
import { acceptObjectSocket, type ObjectStub } from "./object-socket.ts";
/** Replay batches buffered ahead of the client: two keeps the log read and the client busy at once. */
const REPLAY_AHEAD = 2;
/** Per-event overhead the budget adds to the data length, bytes (docs/configuration.md "Limits"). */
export const EVENT_OVERHEAD_BYTES = 256;

export type Budget = { events: number; bytes: number };
/**
 * `tick`: about once a second while the stream is open; `end`: once, when it has ended; `track`:
 * once, with the handle a shutdown ends the stream by (src/streams/open-streams.ts).
 */
export type StreamHooks = { tick?: () => void; end?: () => void; track?: (stream: EndableStream) => void };

/**
 * A frame waiting for the client. Live `assistant.delta` frames keep their event while queued, so
 * consecutive deltas of one turn can be merged into one frame (lossless: the texts concatenate);
 * a merge drops the item's encoding, which is made again when it is written. Everything else is
 * encoded once, when it is queued.
 */
type Item = {
  at: number;
  cost: number;
  live: boolean;
  bytes?: Uint8Array;
  delta?: Event;
  written?: () => void;
};

const encoder = new TextEncoder();

/** A live delta whose data is exactly `{text}`: the only kind merged. */
function isPlainDelta(e: Event): e is Event & { data: { text: string } } {
  if (e.type !== "assistant.delta" || e.cursor !== undefined) return false;
  const keys = Object.keys(e.data);
  return keys.length === 1 && keys[0] === "text" && typeof e.data.text === "string";
}

/** Bytes the text adds inside the JSON envelope (its escaped form without the quotes). */
function escapedLength(text: string): number {
  return encoder.encode(JSON.stringify(text)).length - 2;
}

export async function openSessionStream(
  stub: ObjectStub,
  cursor: string,
  budget: Budget,
  signal: AbortSignal,
  inspectCall?: string,
  hooks: StreamHooks = {},
): Promise<Response> {
  const call = inspectCall ? `&call=${inspectCall}` : "";
  const ws = await acceptObjectSocket(stub, `https://session/subscribe?after=${encodeURIComponent(cursor)}${call}`);

  // The body's controller: a frame is handed to it only when the runtime asks for one, so the
  // frames not yet taken wait here, where the budgets see them and queued deltas can still merge.
  let body!: ReadableStreamDefaultController<Uint8Array>;
  const queue: Item[] = [];
  /** The next frame for the runtime, not yet taken (the one "being written"). */
  let writing: Item | undefined;
  /** The runtime has asked for a frame and none has been handed to it since. */
  let wanted = false;
  let lastWrite = Date.now();
  let done = false;
  let draining = false;

  // Over once the runtime has taken the response's last byte (or the stream was cut).
  let over!: () => void;
  const ended = new Promise<void>((resolve) => (over = resolve));

  let replaying = 0;
  let asked = true;
  const askMore = (more: boolean) => {
    // Draining: the object has sent its last batch and `end` and closed the socket (a closed
    // session's replay), so there is no more to ask for — and a send on it would throw inside a
    // write's callback, and the batches still queued would never be written.
    if (!more || done || draining || asked || replaying >= REPLAY_AHEAD) return;
    asked = true;
    try {
      ws.send(MORE);
    } catch {
      finish(); // the object's side is already gone: nothing more can come from it
    }
  };

  const stop = () => {
    done = true;
    clearInterval(timer);
    hooks.end?.();
    try {
      ws.close(1000, "stream ended");
    } catch {
      // Already closed by the object.
    }
  };

  /** Graceful: what is queued still reaches the client, then the stream ends. */
  const finish = () => {
    if (done || draining) return;
    draining = true;
    try {
      ws.close(1000, "stream ended");
    } catch {
      // Already closed by the object.
    }
    pump();
  };

  /**
   * Disconnects this client: nothing more is queued or handed over, and the body is errored, not
   * closed (a close would keep what the runtime holds waiting to be written, pinned until a client
   * that stopped reading reads again or goes).
   */
  const cut = () => {
    over();
    if (done) return;
    stop();
    queue.length = 0;
    writing = undefined;
    try {
      body.error(new Error(CUT_REASON));
    } catch {
      // The body is already over (the client cancelled it): no one to tell.
    }
  };

  /** Shutdown: the object ends the stream after what it already sent (its `end` comes last). */
  const requestEnd = () => {
    if (done || draining) return;
    try {
      ws.send(END);
    } catch {
      finish(); // the object's side is already gone: nothing more can come from it
    }
  };

  /** Picks the next frame to write; hands it over at once if the runtime is already waiting. */
  const pump = () => {
    if (done || writing) return;
    const item = queue.shift();
    if (!item) {
      if (draining) {
        stop();
        if (wanted) end(); // otherwise the runtime's next ask ends the body
      }
      return;
    }
    writing = item;
    // The write deadline runs from when a frame starts being written, not from when it queued.
    item.at = lastWrite = Date.now();
    if (wanted) hand();
  };

  /** The runtime takes the frame being written; the next one starts. */
  const hand = () => {
    const item = writing!;
    writing = undefined;
    wanted = false;
    body.enqueue(item.bytes ?? encodeEvent(item.delta!).bytes);
    item.written?.();
    pump();
  };

  /** The runtime asked past the last frame: it has taken every byte. */
  const end = () => {
    wanted = false;
    body.close();
    over();
  };

  const enqueue = (item: Item) => {
    queue.push(item);
    pump();
  };

  /** Appends a live event, merging a delta into a queued delta of the same turn right before it. */
  const enqueueLive = (e: Event) => {
    const tail = queue.at(-1);
    if (isPlainDelta(e) && tail?.delta && tail.delta.input_id === e.input_id) {
      const text = (tail.delta.data.text as string) + e.data.text;
      tail.delta = { ...tail.delta, data: { text } };
      tail.bytes = undefined; // encoded again, merged, when it is written
      tail.cost += escapedLength(e.data.text);
      return;
    }
    // A delta keeps its event too, for what may merge into it; one nothing merges into (a turn's
    // first, usually) is written as encoded here.
    const f = encodeEvent(e);
    enqueue({ at: Date.now(), cost: f.dataLength + EVENT_OVERHEAD_BYTES, live: true, bytes: f.bytes, ...(isPlainDelta(e) ? { delta: e } : {}) });
  };

  /** The backlog behind the frame being written (that one is not counted). */
  const overBudget = () => {
    let events = 0;
    let bytes = 0;
    for (const p of queue) {
      if (!p.live) continue;
      events += 1;
      bytes += p.cost;
    }
    return events > budget.events || bytes > budget.bytes;
  };

  ws.addEventListener("message", (m) => {
    if (done || draining) return;
    const msg = JSON.parse(typeof m.data === "string" ? m.data : new TextDecoder().decode(m.data)) as SubscribeDown;
    if (msg.t === "end") return finish();
    if (msg.t === "replay") {
      // A replay batch is one write (it never counts against the live budgets). The next batch is
      // asked for while this one is being written, so reading the log overlaps with the client
      // taking it; at most REPLAY_AHEAD batches are ever buffered.
      asked = false;
      if (msg.events.length > 0) {
        replaying += 1;
        const written = () => {
          replaying -= 1;
          askMore(!msg.live);
        };
        enqueue({ at: Date.now(), cost: 0, live: false, bytes: concatBytes(msg.events.map((e) => encodeEvent(e).bytes)), written });
      }
      return askMore(!msg.live);
    }
    // Judge what piled up before this message: a burst the client is still taking is not a backlog.
    if (overBudget()) return cut();
    for (const e of msg.events) enqueueLive(e);
  });
  ws.addEventListener("close", () => finish());
  // Once the object's side is over (draining), the socket has nothing left to say: an error from it
  // (workerd reports one for a socket both ends closed) must not cut what is still being delivered.
  ws.addEventListener("error", () => {
    if (!draining) cut();
  });
  signal.addEventListener("abort", () => cut());

  const timer = setInterval(() => {
    hooks.tick?.();
    const now = Date.now();
    if (writing && now - writing.at >= WRITE_DEADLINE_MS) return cut();
    if (overBudget()) return cut();
    if (!writing && queue.length === 0 && !draining && now - lastWrite >= KEEPALIVE_MS) enqueue({ at: now, cost: 0, live: false, bytes: KEEPALIVE });
  }, STREAM_CHECK_MS);

  ws.send(MORE);
  hooks.track?.({ end: requestEnd, cut, ended });
  // A pull source: the runtime asks for the next frame once it has taken the one before, so the end
  // is seen when it asks past the last frame (a shutdown waits for exactly that). One stream, no
  // writer in front of it: each frame is one enqueue into the response.
  const stream = new ReadableStream<Uint8Array>(
    {
      start(c) {
        body = c;
      },
      pull() {
        wanted = true;
        if (writing) hand();
        else if (done && draining) end();
      },
      // The client went away: workerd cancels the response body. (In the local stack that is only
      // seen at the next write: a keepalive at the latest.)
      cancel: () => cut(),
    },
    { highWaterMark: 0 },
  );
  return new Response(stream, { headers: SSE_HEADERS });
}
