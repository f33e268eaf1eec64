/**
 * Server-sent event streams as async iterators.
 *
 * `eventStream` is the resumable session stream: it remembers the cursor of the last retained event
 * it yielded and, when the connection drops (a network blip, a deploy, a slow-reader cut-off, a
 * server reload or restart), reconnects with that cursor, so retained events arrive with no gap
 * and no duplicate. Live-only events sent while it was away are not replayed (the service never
 * does). A `429` waits out `Retry-After`; a `5xx` or a network error is retried with back-off, and
 * once a failed attempt and `maxReconnects` retries after it have all failed it gives up (`StreamGaveUpError`, with the cursor
 * to resume from). A stream that opened and then dropped never counts toward that: it reconnects
 * at once, or backing off when its connections keep dropping within a second. It ends after a
 * `session.status` of `closed` (or when the server ends the stream of a session that is closed,
 * as it does for a stream opened after the `closed` event), when the caller stops iterating, or
 * when its signal aborts (also one aborted before the first event). A `409 cursor_unavailable` on
 * a resume (a restore cut the log's tail) starts over from the beginning when `onReset` is given;
 * other error answers (`401`, `404`, `409`, ...) are thrown as `ApiError`.
 */
import { EventSourceParserStream, type EventSourceMessage } from "eventsource-parser/stream";
import { ApiError, retryAfterSeconds, wait, type Transport } from "./http.ts";

export type StreamOptions = {
  /** Start after this cursor (default: the beginning of the log). */
  after?: string;
  signal?: AbortSignal;
  /** Retries of a failed connection attempt (network error, `5xx`), all failing, before giving up (default 20: about a minute). */
  maxReconnects?: number;
  /** Called before each reconnect with the cursor it resumes from and its attempt (1 after a steady drop, counting up while they fail). */
  onReconnect?: (cursor: string, attempt: number) => void;
  /**
   * A restore cut the log behind the cursor (the resume got `409 cursor_unavailable`): when given,
   * it is called and the stream starts over from the beginning of the log (events already yielded
   * come again; drop what you built from them). Without it the `409` is thrown. The service answers
   * a cursor it never gave out for this session (another session's, a made-up one) with the same
   * `409`, so with `onReset` such an `after` starts over from the beginning too.
   */
  onReset?: () => void;
};

/** Thrown when a failed connection attempt and its `maxReconnects` retries all failed; `cursor` resumes the stream, `cause` is the last failure. */
export class StreamGaveUpError extends Error {
  readonly cursor: string;
  constructor(sessionId: string, attempts: number, cursor: string, cause: unknown) {
    super(`event stream of ${sessionId}: gave up after ${attempts} reconnects (resume after ${JSON.stringify(cursor)})`, { cause });
    this.name = "StreamGaveUpError";
    this.cursor = cursor;
  }
}

/** Delay before the n-th consecutive reconnect, ms: immediately, then backing off up to 5 s. */
function backoff(attempt: number): number {
  return attempt <= 1 ? 0 : Math.min(5_000, 100 * 2 ** (attempt - 2));
}
/**
 * Consecutive failed connection attempts before `stream()` gives up: with `backoff` that is about
 * 70 s of trying (0, 0.1, 0.2 … 3.2 s, then 5 s each), longer than a service restart takes.
 */
const DEFAULT_MAX_RECONNECTS = 20;
/** A connection that drops sooner than this after opening delays the next one (back-off), ms. */
const STEADY_MS = 1_000;

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

/** A frame whose data is no event: the service never sends one, so it is not retried as a drop. */
function parseFrame<E>(sessionId: string, f: EventSourceMessage): E {
  try {
    return JSON.parse(f.data) as E;
  } catch {
    throw new Error(`event stream of ${sessionId}: a frame${f.id ? ` (id ${f.id})` : ""} holds no JSON event`);
  }
}

export async function* eventStream<E extends { type: string; data: unknown }>(
  t: Transport,
  sessionId: string,
  o: StreamOptions = {},
): AsyncGenerator<E> {
  if (o.signal?.aborted) return;
  let cursor = o.after ?? "";
  // Connection attempts in a row that failed, and the last failure (for the give-up error);
  // opened streams in a row that dropped within STEADY_MS (they only delay the next attempt).
  let failures = 0;
  let last: unknown;
  let quick = 0;
  // The reconnects in a row began with a steady stream's drop: that drop's reconnect is the first.
  let afterDrop = false;
  // Every pass but the first reconnects; a 429's wait replaces that pass's back-off.
  let reconnecting = false;
  let waited = false;
  const max = o.maxReconnects ?? DEFAULT_MAX_RECONNECTS;
  const ctl = new AbortController();
  const abort = () => ctl.abort(o.signal!.reason);
  o.signal?.addEventListener("abort", abort, { once: true });
  const path = `/sessions/${encodeURIComponent(sessionId)}/events`;
  try {
    for (;;) {
      const attempt = failures + quick + (afterDrop ? 1 : 0);
      if (reconnecting && !waited) {
        if (failures > max) throw new StreamGaveUpError(sessionId, max, cursor, last);
        o.onReconnect?.(cursor, attempt);
        await wait(backoff(attempt), ctl.signal);
      }
      reconnecting = true;
      waited = false;
      let res: Response;
      try {
        // `after` wins over Last-Event-ID, so the query alone says where to resume (also when empty).
        res = await t.raw(t.url(path, { after: cursor }), { headers: t.headers({ Accept: "text/event-stream" }), signal: ctl.signal });
      } catch (e) {
        if (ctl.signal.aborted) return;
        last = e;
        failures++;
        continue;
      }
      if (res.status === 429) {
        await res.body?.cancel();
        await wait((retryAfterSeconds(res) ?? 1) * 1000, ctl.signal);
        waited = true;
        continue;
      }
      if (res.status >= 500) {
        last = await ApiError.from(res);
        failures++;
        continue;
      }
      if (res.status === 409 && cursor !== "" && o.onReset) {
        const e = await ApiError.from(res);
        if (e.code !== "cursor_unavailable") throw e;
        o.onReset();
        cursor = "";
        continue;
      }
      if (!res.ok) throw await ApiError.from(res);
      failures = 0;
      afterDrop = false;
      const opened = Date.now();
      let ended = false;
      const it = frames(res, ctl.signal);
      try {
        for (;;) {
          let next: IteratorResult<EventSourceMessage>;
          try {
            next = await it.next();
          } catch (e) {
            last = e; // a connection cut mid-stream: resume below
            break;
          }
          if (next.done) {
            ended = true;
            break;
          }
          const event = parseFrame<E>(sessionId, next.value);
          // Only retained events carry an `id:`; live-only ones leave the resume point unchanged.
          if (next.value.id !== undefined) cursor = next.value.id;
          quick = 0;
          yield event;
          if (event.type === "session.status" && (event.data as { status?: string }).status === "closed") return;
        }
      } finally {
        await it.return(undefined); // releases the response body whichever way the loop ended
      }
      if (ctl.signal.aborted) return;
      // The server ended the stream: a closed session's (whose `closed` came before our cursor), or
      // a shutdown's, after which the stream resumes elsewhere. Only the session's status tells.
      if (ended && (await isClosed(t, sessionId, ctl.signal))) return;
      // Reconnect at once after a steady connection; back off while they keep dropping at once.
      afterDrop = Date.now() - opened >= STEADY_MS;
      quick = afterDrop ? 0 : quick + 1;
    }
  } catch (e) {
    if (ctl.signal.aborted && !(e instanceof ApiError) && !(e instanceof StreamGaveUpError)) return;
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
