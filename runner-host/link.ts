/**
 * One session link: the runner-host end of the socket to one SessionObject, for one lease
 * (src/shared/runner-protocol.ts "link").
 *
 * Invariants:
 * - Up messages are numbered from 1 for the lease and kept until the object acks them
 *   (acks are cumulative); after a reconnect every unacked one is resent, in order, after `hello`.
 * - Messages sent in one turn of the event loop (numbered and live) leave together, in order, at
 *   the end of it, as one `batch` frame (a turn's last delta, `assistant`, `native` and `turn_end`
 *   usually do): the object applies them in one transaction, publishes them in one push and acks
 *   once. `native` records and acks of down messages wait (up to HOLD_MS) for the next frame with
 *   another numbered message, which the object writes anyway: on their own they would cost it a
 *   commit of their own in the middle of the turn.
 * - Down messages are applied once, in order: a seq already applied is only re-acked; a gap
 *   (never expected on one ordered socket) drops the socket so the object resends from `hello`.
 * - `delta` and `progress` are live-only: sent when the socket is open, otherwise lost.
 * - The link redials with backoff while the lease is live. `LEASE_GONE_CLOSE_CODE` (or an upgrade
 *   refused with 404/409/410) means the lease is gone; so does being unreachable for `giveUpMs`.
 */
import WebSocket from "ws";
import { LEASE_GONE_CLOSE_CODE, LINK_PATH, LinkDownSchema, MAX_BATCH, RUNNER_PROTOCOL, SILENT_AFTER_MS, type LinkDown, type LinkUp, type NumberedUp } from "../src/shared/runner-protocol.ts";
import type { Logger } from "./log.ts";
import { Backoff, dial, isPong, keepAlive, parseJson } from "./socket.ts";

/** Upgrade statuses that mean the same before a socket exists. */
const LEASE_GONE_STATUSES = new Set([404, 409, 410]);
/**
 * How long a link may stay unreachable before the lease is given up, ms. A reachable object that
 * gave up first (it fails the turn 10 s after losing its link) refuses a redial with 409 at once;
 * this bound is for when nothing answers at all (a partition), so a blind turn stops burning
 * provider tokens.
 */
export const LINK_GIVE_UP_MS = 30_000;

export type { NumberedUp };
/**
 * A frame stops taking messages past this many UTF-16 units of JSON, so a batch of large native
 * records stays a modest WebSocket message; one message larger than this goes alone, as before.
 */
const BATCH_CHARS = 1024 * 1024;
/**
 * How long a `native` record or an ack of down messages may wait for a frame with another
 * numbered message (a tool call, the reply, the turn's end), ms. Each would otherwise be a write
 * of its own at the object, and a commit with an `fsync` in the local stack (about one more per
 * turn under load: bench/RESULTS.md, tenth session). Neither is waited on while it waits: the object only
 * trims its resend outbox by acks, and a turn's records count once the turn completes (a turn that
 * does not is cut back to the last checkpoint). Whoever waits for an ack flushes them at once
 * (`waitAcked`). Short enough that a long turn's records still reach the object as it goes.
 */
export const HOLD_MS = 1_000;
/** A numbered up message before the link assigns its seq. */
export type UpBody = NumberedUp extends infer M ? (M extends NumberedUp ? Omit<M, "seq"> : never) : never;
export type LiveUp = Extract<LinkUp, { t: "delta" | "progress" | "credential" }>;
/** Down messages that are not numbered besides acks: answers the object never stores. */
export type LiveDown = Extract<LinkDown, { t: "credential" }>;
export type AppliedDown = Exclude<LinkDown, { t: "ack" | "credential" }>;

export type LinkOptions = {
  baseUrl: string;
  secret: string;
  runnerId: string;
  /** The object name from the attach order. */
  session: string;
  lease: number;
  log: Logger;
  /** Called once per down seq, in order. The link acks it when this returns. */
  onDown(m: AppliedDown): void;
  /** An unnumbered answer (a credential override): handled at once, never acked or kept. */
  onLive?(m: LiveDown): void;
  /** The socket is (re)connected and unacked messages were resent: unanswered questions are asked again. */
  onConnected?(): void;
  /** The lease is gone (refused, 4409, or unreachable too long). Called at most once. */
  onLost(reason: string): void;
  giveUpMs?: number;
};

export class SessionLink {
  readonly #o: LinkOptions;
  #ws: WebSocket | undefined;
  #nextUp = 1;
  #unacked: NumberedUp[] = [];
  /** Messages of this event-loop turn not yet written, as JSON, in order; written by `#flush`. */
  #pending: string[] = [];
  /** `native` records waiting for a frame with another numbered message, as JSON, in seq order. */
  #held: string[] = [];
  /** The flush at the end of this event-loop turn, when one is scheduled. */
  #soon: NodeJS.Immediate | undefined;
  /** The flush of what is held (records, an ack) after HOLD_MS, when anything is. */
  #hold: NodeJS.Timeout | undefined;
  #acked = 0;
  #applied = 0;
  #ended = false;
  #backoff = new Backoff();
  #retry: NodeJS.Timeout | undefined;
  #giveUp: NodeJS.Timeout | undefined;
  #ackQueued = false;
  #ackWaiters = new Set<{ seq: number; resolve(ok: boolean): void }>();

  constructor(o: LinkOptions) {
    this.#o = o;
  }

  get isOpen(): boolean {
    return this.#ws?.readyState === WebSocket.OPEN;
  }
  /** Last down seq applied, last up seq acked, up messages waiting for an ack. */
  get applied(): number {
    return this.#applied;
  }
  get acked(): number {
    return this.#acked;
  }
  get unacked(): number {
    return this.#unacked.length;
  }

  start(): void {
    this.#armGiveUp();
    this.#connect();
  }

  /** Numbers and sends (or keeps, while disconnected) a message; returns its seq. */
  send(body: UpBody): number {
    const m = { ...body, seq: this.#nextUp++ } as NumberedUp;
    if (this.#ended) return m.seq;
    this.#unacked.push(m);
    if (!this.isOpen) return m.seq;
    if (m.t === "native") {
      this.#held.push(JSON.stringify(m));
      this.#holdOn();
      return m.seq;
    }
    this.#release();
    this.#pending.push(JSON.stringify(m));
    this.#flushSoon();
    return m.seq;
  }

  /**
   * Sends a live-only message if the socket is open; false when it was dropped. `now`: it leaves at
   * once, in a frame of its own, when nothing is waiting (a turn's first output does not wait for
   * the end of the event-loop turn, nor carry an ack the object would have to write first).
   */
  sendLive(m: LiveUp, now = false): boolean {
    if (!this.isOpen) return false;
    if (now && !this.#soon) {
      // Ahead of any `native` record still held: those have no events to keep in order with.
      this.#ws!.send(JSON.stringify(m));
      return true;
    }
    if (m.t === "credential") {
      // Not a batch item: it goes as itself, after what is waiting.
      this.#flush();
      this.#ws!.send(JSON.stringify(m));
      return true;
    }
    this.#pending.push(JSON.stringify(m));
    this.#flushSoon();
    return true;
  }

  /** Writes what is waiting: one message alone as itself, more as `batch` frames. */
  #flush(): void {
    if (this.#soon) clearImmediate(this.#soon);
    this.#soon = undefined;
    const out = this.#pending;
    if (out.length === 0) return;
    this.#pending = [];
    if (this.isOpen) writeFrames(this.#ws!, out);
  }

  #flushSoon(): void {
    this.#soon ??= setImmediate(() => this.#flush());
  }

  /** What is held (records, a due ack) joins the pending messages, ahead of what comes next. */
  #release(): void {
    if (this.#hold) clearTimeout(this.#hold);
    this.#hold = undefined;
    this.#pending.push(...this.#held);
    this.#held = [];
    if (this.#ackQueued) {
      this.#ackQueued = false;
      this.#pending.push(JSON.stringify({ t: "ack", down: this.#applied } satisfies LinkUp));
    }
  }

  /** Something is held: it leaves with the next numbered message, or after HOLD_MS. */
  #holdOn(): void {
    this.#hold ??= setTimeout(() => this.#flushAll(), HOLD_MS);
  }

  /** Everything held and pending leaves now. */
  #flushAll(): void {
    this.#release();
    this.#flush();
  }

  /** Resolves true once everything up to `seq` (default: all sent so far) is acked; false on timeout or end. */
  waitAcked(timeoutMs: number, seq = this.#nextUp - 1): Promise<boolean> {
    if (this.#acked >= seq) return Promise.resolve(true);
    if (this.#ended) return Promise.resolve(false);
    if (this.#held.length > 0) this.#flushAll();
    return new Promise((resolve) => {
      const waiter = {
        seq,
        resolve: (ok: boolean) => {
          clearTimeout(timer);
          this.#ackWaiters.delete(waiter);
          resolve(ok);
        },
      };
      const timer = setTimeout(() => waiter.resolve(false), timeoutMs);
      this.#ackWaiters.add(waiter);
    });
  }

  /** Ends the link for good: no more redials, pending waits resolve false. */
  close(code = 1000, reason = ""): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#flushAll();
    clearTimeout(this.#retry);
    clearTimeout(this.#giveUp);
    for (const w of [...this.#ackWaiters]) w.resolve(false);
    this.#ws?.close(code, reason);
  }

  #connect(): void {
    const { session, lease, runnerId } = this.#o;
    const ws = dial(this.#o.baseUrl, LINK_PATH, this.#o.secret, { protocol: String(RUNNER_PROTOCOL), session, lease: String(lease), runner: runnerId });
    this.#ws = ws;
    // Silent past SILENT_AFTER_MS (a partition that left the connection open): the object has been
    // unreachable longer than the give-up already, and the service has failed the turn by now
    // (its pool drops a runner-host silent that long), so the turn stops here too instead of
    // running on, calling its provider and tools, through another give-up period.
    const stopKeepAlive = keepAlive(ws, () => this.#lost(`the session object was silent for ${SILENT_AFTER_MS / 1000} s`));
    ws.on("open", () => {
      this.#backoff.reset();
      clearTimeout(this.#giveUp);
      this.#giveUp = undefined;
      this.#raw({ t: "hello", down: this.#applied });
      // Everything unacked goes again, so what was waiting for the flush is in it (live messages
      // of a dropped socket are lost, as they would have been; hello carries the ack).
      this.#pending = [];
      this.#held = [];
      if (this.#soon) clearImmediate(this.#soon);
      if (this.#hold) clearTimeout(this.#hold);
      this.#soon = this.#hold = undefined;
      this.#ackQueued = false;
      writeFrames(ws, this.#unacked.map((m) => JSON.stringify(m)));
      this.#o.onConnected?.();
    });
    ws.on("message", (data) => this.#onMessage(ws, data.toString()));
    ws.on("refused", (status: number) => {
      if (LEASE_GONE_STATUSES.has(status)) this.#lost(`link refused with HTTP ${status}`);
      else this.#o.log("warn", "session link refused", { session, lease, status });
    });
    ws.on("error", (e) => this.#o.log("debug", "session link error", { session, lease, error: e.message }));
    ws.on("close", (code) => {
      stopKeepAlive();
      if (this.#ws !== ws || this.#ended) return;
      if (code === LEASE_GONE_CLOSE_CODE) return this.#lost("the object ended the lease");
      if (this.#giveUp === undefined) this.#armGiveUp(); // counts from the first drop, not each retry
      this.#retry = setTimeout(() => this.#connect(), this.#backoff.next());
    });
  }

  #armGiveUp(): void {
    this.#giveUp = setTimeout(() => {
      this.#lost(`the session object was unreachable for ${this.#o.giveUpMs ?? LINK_GIVE_UP_MS} ms`);
    }, this.#o.giveUpMs ?? LINK_GIVE_UP_MS);
  }

  #lost(reason: string): void {
    if (this.#ended) return;
    this.#o.log("info", "session lease lost", { session: this.#o.session, lease: this.#o.lease, reason });
    this.close(1000, "lease gone");
    this.#o.onLost(reason);
  }

  #onMessage(ws: WebSocket, text: string): void {
    if (isPong(text) || this.#ended || ws !== this.#ws) return;
    const parsed = LinkDownSchema.safeParse(parseJson(text));
    if (!parsed.success) {
      return this.#o.log("warn", "invalid link message from object", { session: this.#o.session });
    }
    const m = parsed.data;
    if (m.t === "ack") return this.#onAck(m.up);
    if (m.t === "credential") return this.#o.onLive?.(m);
    if (m.seq <= this.#applied) return this.#queueAck(); // a resend of something applied
    if (m.seq !== this.#applied + 1) {
      this.#o.log("warn", "gap in link messages; redialling", { session: this.#o.session, expected: this.#applied + 1, got: m.seq });
      return ws.terminate();
    }
    this.#applied = m.seq;
    this.#queueAck();
    try {
      this.#o.onDown(m);
    } catch (err) {
      // A bug in a handler must not take the runner-host down with every other session.
      this.#o.log("error", "link message handler failed", { session: this.#o.session, t: m.t, error: (err as Error).message });
    }
  }

  #onAck(up: number): void {
    if (up <= this.#acked) return;
    this.#acked = up;
    while (this.#unacked.length > 0 && this.#unacked[0]!.seq <= up) this.#unacked.shift();
    for (const w of [...this.#ackWaiters]) if (w.seq <= up) w.resolve(true);
  }

  /** One cumulative ack per burst of down messages, with the next numbered message or after HOLD_MS. */
  #queueAck(): void {
    if (this.#ackQueued) return;
    this.#ackQueued = true;
    this.#holdOn();
  }

  #raw(m: LinkUp): void {
    if (this.isOpen) this.#ws!.send(JSON.stringify(m));
  }
}

/** Messages (JSON, numbered ones with consecutive seqs) in as few frames as MAX_BATCH and BATCH_CHARS allow. */
function writeFrames(ws: WebSocket, msgs: string[]): void {
  let i = 0;
  while (i < msgs.length) {
    let j = i + 1;
    let chars = msgs[i]!.length;
    while (j < msgs.length && j - i < MAX_BATCH && chars + msgs[j]!.length <= BATCH_CHARS) chars += msgs[j++]!.length;
    ws.send(j - i === 1 ? msgs[i]! : `{"t":"batch","msgs":[${msgs.slice(i, j).join(",")}]}`);
    i = j;
  }
}
