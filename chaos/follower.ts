/**
 * A client that follows one session's events over SSE for a whole chaos run, the way a careful
 * client does: when the stream ends (the server cut a slow reader, a deploy dropped sockets, the
 * process died) it reconnects with the cursor of the last retained event it received, alternating
 * between `Last-Event-ID` and `?after=`, and keeps every retained event in arrival order, so the
 * judge can tell a lost, doubled or misplaced event.
 *
 * While the service is known to be down the reconnect waits on `gate` (the chaos driver opens it
 * when the service is back); a refused or failed open backs off 50 ms doubling to 1 s, as a client
 * must. An open answered with a 5xx is recorded: no input may produce one.
 */
import { EventSourceParserStream } from "eventsource-parser/stream";
import { setTimeout as sleep } from "node:timers/promises";
import type { Event } from "../src/shared/api-schema.ts";

/** First and largest backoff between failed opens, ms. */
const BACKOFF_FIRST_MS = 50;
const BACKOFF_MAX_MS = 1_000;

export type FollowerOptions = {
  base: string;
  session: string;
  token: string;
  /** Resolves when the service is up (immediately when no fault has it down). */
  gate(): Promise<void>;
};

type Waiter = { pred: (e: Event) => boolean; resolve: (e: Event) => void };

export class Follower {
  readonly streamed: Event[] = [];
  /** Streams that ended without this client closing them. */
  cuts = 0;
  connections = 0;
  failedOpens = 0;
  /** Opens answered with a status ≥ 500 (each one a violation). */
  serverErrors: string[] = [];
  /** While set, the reader awaits it before reading the next frame: a slow consumer. */
  stall: (() => Promise<void>) | undefined;
  readonly #o: FollowerOptions;
  #cursor = "";
  #closed = new AbortController();
  #waiters = new Set<Waiter>();
  #loop: Promise<void> | undefined;

  constructor(o: FollowerOptions) {
    this.#o = o;
  }

  start(): void {
    this.#loop = this.#run();
  }

  /** Stops following; resolves when the read loop has ended. */
  async close(): Promise<void> {
    this.#closed.abort();
    await this.#loop;
  }

  /** The first retained event (received or to come) that matches; rejects after `timeoutMs`. */
  waitFor(pred: (e: Event) => boolean, timeoutMs: number, what: string): Promise<Event> {
    const seen = this.streamed.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const w: Waiter = { pred, resolve: (e) => (clearTimeout(t), resolve(e)) };
      const t = setTimeout(() => {
        this.#waiters.delete(w);
        reject(new Error(`${this.#o.session}: no ${what} within ${timeoutMs} ms (streamed: ${this.streamed.slice(-6).map(label).join(", ")})`));
      }, timeoutMs);
      this.#waiters.add(w);
    });
  }

  async #run(): Promise<void> {
    let backoff = BACKOFF_FIRST_MS;
    for (let n = 0; !this.#closed.signal.aborted; n++) {
      await this.#o.gate();
      if (this.#closed.signal.aborted) return;
      const opened = await this.#open(n % 2 === 0);
      if (opened === "closed") return;
      if (opened === "failed") {
        this.failedOpens++;
        await sleep(backoff, undefined, { signal: this.#closed.signal }).catch(() => {});
        backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
        continue;
      }
      backoff = BACKOFF_FIRST_MS;
      if (!this.#closed.signal.aborted) this.cuts++;
    }
  }

  /** One connection: "read" once it was open and has ended, else why not. */
  async #open(viaHeader: boolean): Promise<"read" | "failed" | "closed"> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.#o.token}`, Accept: "text/event-stream" };
    let url = `${this.#o.base}/sessions/${this.#o.session}/events`;
    if (viaHeader && this.#cursor) headers["Last-Event-ID"] = this.#cursor;
    else url += `?after=${encodeURIComponent(this.#cursor)}`;
    let res: Response;
    try {
      res = await fetch(url, { headers, signal: this.#closed.signal });
    } catch {
      return this.#closed.signal.aborted ? "closed" : "failed";
    }
    if (res.status !== 200 || !res.body) {
      if (res.status >= 500) this.serverErrors.push(`stream open gave ${res.status}: ${(await res.text()).slice(0, 200)}`);
      else await res.body?.cancel();
      return "failed";
    }
    this.connections++;
    const reader = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
    try {
      for (;;) {
        if (this.stall) await this.stall();
        const { done, value } = await reader.read();
        if (done) break;
        if (value.id === undefined) continue; // live-only (deltas, progress): not judged
        const e = JSON.parse(value.data) as Event;
        this.#cursor = value.id;
        this.streamed.push(e);
        for (const w of [...this.#waiters]) {
          if (w.pred(e)) {
            this.#waiters.delete(w);
            w.resolve(e);
          }
        }
      }
    } catch {
      // Cut by the server or the network, or closed here: the loop tells them apart.
    }
    return this.#closed.signal.aborted ? "closed" : "read";
  }
}

export const label = (e: Event): string =>
  `${e.type}${e.data.status ? `:${String(e.data.status)}` : ""}${e.data.code ? `:${String(e.data.code)}` : ""}`;
