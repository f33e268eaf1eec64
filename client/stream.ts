/**
 * Server-sent event streams as async iterators.
 *
 * `eventStream` is the resumable session stream: it remembers the cursor of the last retained event
 * it yielded and, when the connection drops (a network blip, a deploy, a slow-reader cut-off, a
 * server reload), reconnects with that cursor, so retained events arrive with no gap and no
 * duplicate. Live-only events sent while it was away are not replayed (the service never does). A
 * `429` waits out `Retry-After`. It ends after a `session.status` of `closed` (or when the server
 * ends the stream of a session that is closed, as it does for a stream opened after the `closed`
 * event), when the caller stops iterating, or when its signal aborts. Other error answers (`404`, `409
 * cursor_unavailable`, ...) are thrown as `ApiError`.
 */
import { EventSourceParserStream, type EventSourceMessage } from "eventsource-parser/stream";
import { ApiError, retryAfterSeconds, wait, type Transport } from "./http.ts";

export type StreamOptions = {
  /** Start after this cursor (default: the beginning of the log). */
  after?: string;
  signal?: AbortSignal;
  /** Consecutive failed connection attempts before giving up (default 10). */
  maxReconnects?: number;
  /** Called before each reconnect with the cursor it resumes from (for logs and tests). */
  onReconnect?: (cursor: string, attempt: number) => void;
};

/** Delay before the n-th consecutive reconnect, ms: immediately, then backing off up to 2 s. */
function backoff(attempt: number): number {
  return attempt <= 1 ? 0 : Math.min(2_000, 100 * 2 ** (attempt - 2));
}
const DEFAULT_MAX_RECONNECTS = 10;

/** Opens one SSE response and yields its frames; returns when the server ends it. */
export async function* frames(res: Response, signal?: AbortSignal): AsyncGenerator<EventSourceMessage> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  const cancel = () => void reader.cancel().catch(() => {});
  signal?.addEventListener("abort", cancel, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    signal?.removeEventListener("abort", cancel);
    cancel();
  }
}

export async function* eventStream<E extends { type: string; data: unknown }>(
  t: Transport,
  sessionId: string,
  o: StreamOptions = {},
): AsyncGenerator<E> {
  let cursor = o.after ?? "";
  let failures = 0;
  const max = o.maxReconnects ?? DEFAULT_MAX_RECONNECTS;
  const ctl = new AbortController();
  const abort = () => ctl.abort(o.signal!.reason);
  o.signal?.addEventListener("abort", abort, { once: true });
  try {
    for (;;) {
      if (failures > 0) {
        if (failures > max) throw new Error(`event stream of ${sessionId}: gave up after ${max} reconnects`);
        o.onReconnect?.(cursor, failures);
        await wait(backoff(failures), ctl.signal);
      }
      let res: Response;
      try {
        // `after` wins over Last-Event-ID, so the query alone says where to resume (also when empty).
        res = await t.raw(t.url(`/sessions/${sessionId}/events`, { after: cursor }), {
          headers: t.headers({ Accept: "text/event-stream" }),
          signal: ctl.signal,
        });
      } catch {
        if (ctl.signal.aborted) return;
        failures++;
        continue;
      }
      if (res.status === 429) {
        await res.body?.cancel();
        await wait((retryAfterSeconds(res) ?? 1) * 1000, ctl.signal);
        continue;
      }
      if (!res.ok) throw await ApiError.from(res);
      let ended = false;
      try {
        for await (const f of frames(res, ctl.signal)) {
          const event = JSON.parse(f.data) as E;
          // Only retained events carry an `id:`; live-only ones leave the resume point unchanged.
          if (f.id !== undefined) cursor = f.id;
          failures = 0;
          yield event;
          if (event.type === "session.status" && (event.data as { status?: string }).status === "closed") return;
        }
        ended = true;
      } catch {
        // A connection cut mid-stream: resume below.
      }
      if (ctl.signal.aborted) return;
      // The server ended the stream: a closed session's (whose `closed` came before our cursor), or
      // a shutdown's, after which the stream resumes elsewhere. Only the session's status tells.
      if (ended && (await isClosed(t, sessionId, ctl.signal))) return;
      failures++;
    }
  } catch (e) {
    if (ctl.signal.aborted && !(e instanceof ApiError)) return;
    throw e;
  } finally {
    o.signal?.removeEventListener("abort", abort);
    ctl.abort();
  }
}

/** True when the session is `closed`; false when it is not, or when that cannot be read now. */
async function isClosed(t: Transport, sessionId: string, signal: AbortSignal): Promise<boolean> {
  try {
    const s = await t.json<{ status: string }>("GET", `/sessions/${encodeURIComponent(sessionId)}`, { signal });
    return s.status === "closed";
  } catch {
    return false;
  }
}
