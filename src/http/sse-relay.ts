/**
 * The Worker end of an SSE stream (docs/architecture.md "The parts"): one hibernatable socket to the
 * SessionObject per client, frames written to the client here, where its backlog is visible.
 *
 * Budgets (spec "SSE wire format" 7, docs/api.md "SSE"): live events written but not yet taken by the
 * client count as their data length + 256 bytes; the event being written is not counted. Going over
 * `subscriber_events` or `subscriber_bytes`, or a frame unwritten for 15 s, disconnects this client
 * only. Replay is pulled batch by batch (`more` once a batch is written), so it never piles up.
 */
import { MORE, type SubscribeDown } from "../shared/subscribe-protocol.ts";
import { concatBytes } from "../shared/bytes.ts";
import { ServiceError, type ErrorBody } from "../shared/errors.ts";
import { encodeEvent, KEEPALIVE } from "./sse.ts";

/** Spec "SSE keepalive and write deadline": 15 s each. */
export const KEEPALIVE_MS = 15_000;
export const WRITE_DEADLINE_MS = 15_000;
/** Replay batches buffered ahead of the client: two keeps the log read and the client busy at once. */
const REPLAY_AHEAD = 2;
/** Per-event overhead the budget adds to the data length, bytes (spec). */
export const EVENT_OVERHEAD_BYTES = 256;

export type Budget = { events: number; bytes: number };

/** What the relay needs of the object's socket (Workers' WebSocket fits; tests pass a fake). */
export type SocketLike = {
  accept(): void;
  send(m: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "message", fn: (e: { data: string | ArrayBuffer }) => void): void;
  addEventListener(type: "close" | "error", fn: () => void): void;
};
export type SubscribeStub = {
  fetch(input: string, init?: RequestInit): Promise<{ status: number; webSocket?: SocketLike | null; json(): Promise<unknown> }>;
};

type Pending = { at: number; cost: number; live: boolean };

export async function openSessionStream(
  stub: SubscribeStub,
  cursor: string,
  budget: Budget,
  signal: AbortSignal,
  inspectCall?: string,
): Promise<Response> {
  const call = inspectCall ? `&call=${inspectCall}` : "";
  const res = await stub.fetch(`https://session/subscribe?after=${encodeURIComponent(cursor)}${call}`, {
    headers: { Upgrade: "websocket" },
  });
  if (res.status !== 101 || !res.webSocket) throw ServiceError.from((await res.json()) as ErrorBody);
  const ws = res.webSocket;
  ws.accept();

  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const pending: Pending[] = [];
  let lastWrite = Date.now();
  let done = false;

  let replaying = 0;
  let asked = true;
  const askMore = (more: boolean) => {
    if (!more || done || asked || replaying >= REPLAY_AHEAD) return;
    asked = true;
    ws.send(MORE);
  };

  const finish = (graceful: boolean) => {
    if (done) return;
    done = true;
    clearInterval(timer);
    try {
      ws.close(1000, "stream ended");
    } catch {
      // Already closed by the object.
    }
    if (graceful) writer.close().catch(() => {});
    else writer.abort(new Error("subscriber disconnected")).catch(() => {});
  };

  const write = (bytes: Uint8Array, cost: number, live: boolean): Promise<void> => {
    const p: Pending = { at: Date.now(), cost, live };
    pending.push(p);
    lastWrite = p.at;
    return writer.write(bytes).then(
      () => {
        pending.splice(pending.indexOf(p), 1);
        // The write deadline runs from when a frame starts being written, not from when it queued.
        if (pending[0]) pending[0].at = Date.now();
      },
      () => finish(false),
    );
  };

  /** The backlog behind the frame being written (the head is not counted). */
  const overBudget = () => {
    let events = 0;
    let bytes = 0;
    for (const p of pending.slice(1)) {
      if (!p.live) continue;
      events += 1;
      bytes += p.cost;
    }
    return events > budget.events || bytes > budget.bytes;
  };

  ws.addEventListener("message", (m) => {
    if (done) return;
    const msg = JSON.parse(typeof m.data === "string" ? m.data : new TextDecoder().decode(m.data)) as SubscribeDown;
    // Closing the writer flushes what is queued first, so the final events reach the client.
    if (msg.t === "end") return finish(true);
    if (msg.t === "replay") {
      // A replay batch is one write (it never counts against the live budgets). The next batch is
      // asked for while this one is being written, so reading the log overlaps with the client
      // taking it; at most REPLAY_AHEAD batches are ever buffered.
      asked = false;
      replaying += 1;
      if (msg.events.length > 0) {
        void write(concatBytes(msg.events.map((e) => encodeEvent(e).bytes)), 0, false).then(() => {
          replaying -= 1;
          askMore(!msg.live);
        });
      } else {
        replaying -= 1;
      }
      return askMore(!msg.live);
    }
    // Judge what piled up before this message: a burst the client is still taking is not a backlog.
    if (overBudget()) return finish(false);
    for (const e of msg.events) {
      const f = encodeEvent(e);
      void write(f.bytes, f.dataLength + EVENT_OVERHEAD_BYTES, true);
    }
  });
  // The client went away: workerd cancels the response body, which errors the writable side. (Behind
  // the local stack's proxy that is only seen at the next write: a keepalive at the latest.)
  writer.closed.catch(() => finish(false));
  ws.addEventListener("close", () => finish(true));
  ws.addEventListener("error", () => finish(false));
  signal.addEventListener("abort", () => finish(false));

  const timer = setInterval(() => {
    const now = Date.now();
    if (pending.length > 0 && now - pending[0]!.at >= WRITE_DEADLINE_MS) return finish(false);
    if (overBudget()) return finish(false);
    if (pending.length === 0 && now - lastWrite >= KEEPALIVE_MS) void write(KEEPALIVE, 0, false);
  }, 1_000);

  ws.send(MORE);
  return new Response(readable, {
    headers: { "Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no" },
  });
}
