/**
 * Live subscribers of one session: the SSE relays' sockets, accepted with the hibernation API so
 * an idle watched session lets its object sleep.
 *
 * Each socket's attachment holds its mode and, while replaying, the last `seq` it was sent. Replay
 * batches are read from SQLite synchronously and the switch to live happens in the same
 * synchronous step that finds the socket caught up, so an event appended during a replay is
 * either read by the replay or pushed live, never both and never neither.
 */
import type { Event } from "../shared/api-schema.ts";
import { END, MORE, REPLAY_BATCH, REPLAY_BATCH_BYTES, type SubscribeDown } from "../shared/subscribe-protocol.ts";

const TAG = "sse";

/** `call`: the stream was opened with an inspection token for this tool call. */
type Attachment = { mode: "replay" | "live"; seq: number; call?: string };

export type ReplaySource = {
  /** Retained events after `seq` (with cursors), at most `limit`, and the log's last seq. */
  read(seq: number, limit: number, maxBytes: number): { events: { seq: number; event: Event }[]; lastSeq: number };
  closed(): boolean;
};

export class Subscribers {
  readonly #ctx: DurableObjectState;
  /** Attachments are the truth (they survive hibernation); this only saves deserialising. */
  readonly #cache = new WeakMap<WebSocket, Attachment>();

  constructor(ctx: DurableObjectState) {
    this.#ctx = ctx;
  }

  accept(seq: number, call?: string): Response {
    const pair = new WebSocketPair();
    const server = pair[1];
    this.#ctx.acceptWebSocket(server, [TAG]);
    this.#set(server, call ? { mode: "replay", seq, call } : { mode: "replay", seq });
    return new Response(null, { status: 101, webSocket: pair[0] });
  }

  isSubscriber(ws: WebSocket): boolean {
    try {
      return this.#ctx.getTags(ws).includes(TAG);
    } catch {
      // A socket this object already closed has no tags any more (its close echo arrives later).
      return false;
    }
  }

  /** The relay asks for the next replay batch, or (shutdown) for the end after what it was sent. */
  onMessage(ws: WebSocket, message: string, source: ReplaySource): void {
    if (message === END) {
      send(ws, { t: "end" });
      ws.close(1000, "stream ended by the service");
      return;
    }
    if (message !== MORE) {
      ws.close(1008, "unexpected message");
      return;
    }
    const a = this.#get(ws);
    if (a.mode === "live") return;
    const { events, lastSeq } = source.read(a.seq, REPLAY_BATCH, REPLAY_BATCH_BYTES);
    const seq = events.at(-1)?.seq ?? a.seq;
    const caughtUp = seq >= lastSeq;
    if (caughtUp && source.closed()) {
      if (events.length > 0) send(ws, { t: "replay", events: events.map((e) => e.event), live: false });
      send(ws, { t: "end" });
      ws.close(1000, "session closed");
      return;
    }
    this.#set(ws, { ...a, mode: caughtUp ? "live" : "replay", seq });
    send(ws, { t: "replay", events: events.map((e) => e.event), live: caughtUp });
  }

  /** Pushes events to every live socket; replaying sockets will read retained ones from the log. */
  publish(events: Event[]): void {
    if (events.length === 0) return;
    let message: string | undefined; // the same for every stream: encoded once, for the first
    for (const ws of this.#ctx.getWebSockets(TAG)) {
      if (ws.readyState !== WebSocket.OPEN || this.#get(ws).mode !== "live") continue;
      ws.send((message ??= JSON.stringify({ t: "live", events } satisfies SubscribeDown)));
    }
  }

  /** After the session closed and its final events were published: end every live stream. */
  endLive(): void {
    for (const ws of this.#ctx.getWebSockets(TAG)) {
      if (ws.readyState !== WebSocket.OPEN || this.#get(ws).mode !== "live") continue;
      send(ws, { t: "end" });
      ws.close(1000, "session closed");
    }
  }

  /** The history was replaced (restore): every stream ends; clients reconnect with their cursor. */
  endAll(reason: string): void {
    for (const ws of this.#ctx.getWebSockets(TAG)) {
      if (ws.readyState !== WebSocket.OPEN) continue;
      send(ws, { t: "end" });
      ws.close(1000, reason);
    }
  }

  /** The tool call an inspection stream belongs to has ended: so does the stream. */
  endCall(call: string): void {
    for (const ws of this.#ctx.getWebSockets(TAG)) {
      if (ws.readyState !== WebSocket.OPEN || this.#get(ws).call !== call) continue;
      send(ws, { t: "end" });
      ws.close(1000, "inspection ended");
    }
  }

  #get(ws: WebSocket): Attachment {
    let a = this.#cache.get(ws);
    if (!a) {
      a = ws.deserializeAttachment() as Attachment;
      this.#cache.set(ws, a);
    }
    return a;
  }

  #set(ws: WebSocket, a: Attachment): void {
    ws.serializeAttachment(a);
    this.#cache.set(ws, a);
  }
}

function send(ws: WebSocket, m: SubscribeDown): void {
  ws.send(JSON.stringify(m));
}
