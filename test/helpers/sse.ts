/**
 * A real SSE client for tests: fetch + eventsource-parser, exposing frames exactly as they were
 * framed on the wire (`id` undefined on live-only events) and comment frames (keepalives).
 */
import { EventSourceParserStream } from "eventsource-parser/stream";
import { recordViolation, validateFrame, validateResponse, validateStreamHead } from "./contract.ts";

export type Frame = { id?: string; event?: string; data: string; json: any };

export type SseStream = {
  status: number;
  headers: Headers;
  frames: Frame[];
  comments: string[];
  /** Resolves when `n` frames have arrived in total. */
  waitFrames(n: number, timeoutMs?: number): Promise<Frame[]>;
  /** Resolves when a comment frame with this text (trimmed) has arrived. */
  waitForComment(text: string, timeoutMs?: number): Promise<void>;
  /** Resolves with the first frame (already received or later) that matches. */
  waitFor(pred: (f: Frame) => boolean, timeoutMs?: number): Promise<Frame>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
};

export async function openSse(
  url: string,
  o: {
    token: string;
    lastEventId?: string;
    signal?: AbortSignal;
    /**
     * Reconnect with the last cursor whenever the server ends the stream, as the API reference
     * tells clients to (a stream that falls behind by `subscriber_bytes` is disconnected): frames of
     * every connection go to one `frames`, `ended` waits for the test's `close`.
     */
    resume?: boolean;
  },
): Promise<SseStream> {
  const ctl = new AbortController();
  o.signal?.addEventListener("abort", () => ctl.abort());
  const open = (lastEventId: string | undefined) => {
    const headers: Record<string, string> = { Authorization: `Bearer ${o.token}`, Accept: "text/event-stream" };
    if (lastEventId !== undefined) headers["Last-Event-ID"] = lastEventId;
    return fetch(url, { headers, signal: ctl.signal });
  };
  const res = await open(o.lastEventId);
  const frames: Frame[] = [];
  const comments: string[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const commentWaiters: { text: string; resolve: () => void }[] = [];
  let reconnects = 0;
  let serverEnded = false;
  const onComment = (c: string) => {
    comments.push(c);
    for (const w of [...commentWaiters]) if (c.trim() === w.text) (commentWaiters.splice(commentWaiters.indexOf(w), 1), w.resolve());
  };
  let endedResolve!: () => void;
  const ended = new Promise<void>((r) => (endedResolve = r));
  // The contract: a stream's head and each frame, or an error's whole response.
  const media = res.status === 200 ? validateStreamHead("GET", url, res.status, res.headers) : undefined;
  if (res.status !== 200) validateResponse({ method: "GET", url, status: res.status, headers: res.headers, text: await res.text() });
  const pump = async (r: Response) => {
    const reader = r.body!
      .pipeThrough(new TextDecoderStream())
      .pipeThrough(new EventSourceParserStream({ onComment }))
      .getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        recordViolation(() => validateFrame(media!, value));
        frames.push({ id: value.id, event: value.event, data: value.data, json: JSON.parse(value.data) });
        for (const w of [...waiters]) if (frames.length >= w.n) (waiters.splice(waiters.indexOf(w), 1), w.resolve());
      }
    } catch {
      // Aborted by the test or cut off by the server: `ended` tells both apart by timing only.
    }
  };
  if (res.status === 200 && res.body) {
    void (async () => {
      let r: Response | undefined = res;
      while (r) {
        await pump(r);
        r = undefined;
        if (ctl.signal.aborted) break;
        serverEnded = true;
        if (!o.resume) break;
        const last = frames.findLast((f) => f.id !== undefined)?.id ?? o.lastEventId;
        try {
          r = await open(last);
          reconnects++;
        } catch {
          break; // aborted by the test while reconnecting
        }
        if (r.status !== 200 || !r.body) {
          validateResponse({ method: "GET", url, status: r.status, headers: r.headers, text: await r.text() });
          break;
        }
        serverEnded = false;
      }
      endedResolve();
    })();
  } else {
    endedResolve();
  }
  const seen = () =>
    `${frames.map((f) => `${f.event}${f.json.data?.status ? `:${f.json.data.status}` : ""}`).join(",")}` +
    `${reconnects > 0 ? ` (${reconnects} reconnections)` : ""}${serverEnded ? " (the server ended the stream)" : ""}`;
  return {
    status: res.status,
    headers: res.headers,
    frames,
    comments,
    ended,
    waitFrames(n, timeoutMs = 15_000) {
      if (frames.length >= n) return Promise.resolve(frames);
      return new Promise((resolve, reject) => {
        const t = setTimeout(
          () => reject(new Error(`timed out waiting for ${n} frames; got ${frames.length}: ${seen()}`)),
          timeoutMs,
        );
        waiters.push({ n, resolve: () => (clearTimeout(t), resolve(frames)) });
      });
    },
    waitForComment(text, timeoutMs = 20_000) {
      if (comments.some((c) => c.trim() === text)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`timed out waiting for comment ${text}`)), timeoutMs);
        commentWaiters.push({ text, resolve: () => (clearTimeout(t), resolve()) });
      });
    },
    waitFor(pred, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const t = setTimeout(
          () => reject(new Error(`timed out waiting for a frame; got: ${seen()}`)),
          timeoutMs,
        );
        const check = () => {
          const f = frames.find(pred);
          if (f) {
            clearTimeout(t);
            resolve(f);
            return true;
          }
          return false;
        };
        if (check()) return;
        const w = { n: 0, resolve: () => {} };
        const poll = () => {
          if (!check()) {
            w.n = frames.length + 1;
            waiters.push(w);
          }
        };
        w.resolve = poll;
        poll();
      });
    },
    close: () => ctl.abort(),
  };
}
