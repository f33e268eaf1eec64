/**
 * The Worker end of an executor's command stream (`GET /executors/{id}/commands`): one
 * hibernatable socket to the ExecutorObject, each Command it sends written as an SSE frame
 * `event: <type>` + `data: <Command JSON>` with no `id:` (commands are never replayed).
 *
 * A frame the client has not taken within the write deadline, or the client going away, closes
 * the socket: the object then ends the calls this connection had in flight as unknown outcomes.
 * Keepalives follow the event streams' 15 s rule. A shutdown ends it like an event stream
 * (src/streams/open-streams.ts), so its `limits.subscribers` slot is given back before the runtime
 * stops (a slot never given back stays counted until its holding lapses, ~60 s into the next start).
 */
import { KEEPALIVE } from "./frame.ts";
import { KEEPALIVE_MS, SSE_HEADERS, STREAM_CHECK_MS, WRITE_DEADLINE_MS } from "./stream-rules.ts";
import { acceptObjectSocket, type ObjectStub } from "./object-socket.ts";
import type { EndableStream } from "../streams/open-streams.ts";

const encoder = new TextEncoder();

/**
 * `tick`: about once a second while the stream is open; `end`: once, when it has ended; `track`:
 * hands the stream to the isolate's registry, which ends it at a shutdown.
 */
export type CommandStreamHooks = { tick?: () => void; end?: () => void; track?: (stream: EndableStream) => void };

export async function openCommandStream(
  stub: ObjectStub,
  headers: Record<string, string>,
  signal: AbortSignal,
  hooks: CommandStreamHooks = {},
): Promise<Response> {
  const ws = await acceptObjectSocket(stub, "https://executor/commands", headers);

  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  /** Start times of frames not yet taken by the client. */
  const pending: number[] = [];
  let lastWrite = Date.now();
  let done = false;
  const { promise: ended, resolve: over } = Promise.withResolvers<void>();

  const finish = (graceful: boolean) => {
    if (done) return;
    done = true;
    clearInterval(timer);
    hooks.end?.();
    try {
      ws.close(1000, "stream ended");
    } catch {
      // Already closed by the object.
    }
    if (graceful) writer.close().then(over, over);
    else writer.abort(new Error("command stream ended")).then(over, over);
  };

  const write = (bytes: Uint8Array) => {
    const at = Date.now();
    pending.push(at);
    lastWrite = at;
    writer.write(bytes).then(
      () => void pending.shift(),
      () => finish(false),
    );
  };

  ws.addEventListener("message", (m) => {
    if (done) return;
    const text = typeof m.data === "string" ? m.data : new TextDecoder().decode(m.data);
    const type = (JSON.parse(text) as { type: string }).type;
    write(encoder.encode(`event: ${type}\ndata: ${text}\n\n`));
  });
  writer.closed.catch(() => finish(false));
  ws.addEventListener("close", () => finish(true));
  ws.addEventListener("error", () => finish(false));
  signal.addEventListener("abort", () => finish(false));

  const timer = setInterval(() => {
    hooks.tick?.();
    const now = Date.now();
    if (pending.length > 0 && now - pending[0]! >= WRITE_DEADLINE_MS) return finish(false);
    if (pending.length === 0 && now - lastWrite >= KEEPALIVE_MS) write(KEEPALIVE);
  }, STREAM_CHECK_MS);

  hooks.track?.({
    end: () => finish(true),
    // After a graceful end the client never read, the writer is aborted here; otherwise `finish` does it.
    cut: () => (done ? void writer.abort(new Error("command stream cut")).then(over, over) : finish(false)),
    ended,
  });
  return new Response(readable, { headers: SSE_HEADERS });
}
