/**
 * What a runner-host's messages on the session's link do (protocol: src/shared/runner-protocol.ts):
 * a hello opens the lease or resends what the runner-host has not acknowledged; numbered messages
 * are applied once each (turns.ts) and acknowledged once per frame; live ones (deltas, progress)
 * are published and never stored; a credential request is answered straight to the socket.
 *
 * Lifecycle: no state of its own; the link's numbering and sockets are runner-link.ts's, what is
 * applied is in SQLite with `session.up_seq`.
 */
import type { Event } from "../shared/api-schema.ts";
import { LEASE_GONE_CLOSE_CODE, parseLinkUp, type BatchItem, type NumberedUp } from "../shared/runner-protocol.ts";
import { log } from "../log.ts";
import type { Runtime } from "../runtime.ts";
import { now } from "./clock.ts";
import type { LoggedEvent } from "./event-log.ts";
import { openMessages } from "./open-message.ts";
import type { Publication } from "./publication.ts";
import type { RunnerLink } from "./runner-link.ts";
import type { RuntimeCalls } from "./runtime-calls.ts";
import type { Scheduler } from "./scheduler.ts";
import type { SessionState } from "./session-state.ts";
import type { Applied, Turns } from "./turns.ts";

export type RunnerMessagesParts = {
  state: Pick<SessionState, "row" | "require" | "set" | "storage">;
  turns: Turns;
  link: Pick<RunnerLink, "leaseOf" | "acked" | "ackUp" | "push" | "release">;
  calls: Pick<RuntimeCalls, "credential" | "dispatch">;
  /** Live-only events (deltas, progress), straight to the subscribers (subscribers.ts). */
  live: (events: Event[]) => void;
  publication: Pick<Publication, "publish">;
  work: Pick<Scheduler, "loseRunner" | "afterChange" | "schedule" | "pushIndex" | "failUnstored">;
  runtime: () => Promise<Runtime>;
};

export class RunnerMessages {
  /** The narrow parts it works with (one field: they are all the object's, wired once). */
  readonly #p: RunnerMessagesParts;

  constructor(parts: RunnerMessagesParts) {
    this.#p = parts;
  }

  /** A message on a runner socket (runner-link.ts tells those from subscribers' sockets). */
  onMessage(ws: WebSocket, text: string): Promise<void> | void {
    const parsed = parseLinkUp(text);
    if (!parsed.success) {
      log("warn", "invalid runner link message", { session_id: this.#p.state.row()?.id });
      return ws.close(1008, "invalid link message");
    }
    const row = this.#p.state.row();
    // A link the object let go of (resume, restore, detach) keeps its lease number until the next
    // placement; what its socket still delivers (a stopped turn's records, a tool call) is not kept.
    if (this.#p.link.leaseOf(ws) !== row?.lease || row.link_state === "none") return ws.close(LEASE_GONE_CLOSE_CODE, "lease is not current");
    const m = parsed.data;
    switch (m.t) {
      case "hello":
        return this.#hello(m.down);
      case "ack":
        return this.#p.link.acked(m.down, false);
      case "credential":
        return this.#p.calls.credential(m.call_id).then((answer) => {
          // Straight to the socket: an override's plaintext is never stored with the link messages.
          if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(answer));
        });
      case "delta":
      case "progress": {
        const e = this.#p.turns.live(m, now());
        if (e) this.#p.live([e]);
        return;
      }
      case "batch":
        return this.#apply(ws, m.msgs);
      default:
        return this.#apply(ws, [m]);
    }
  }

  /**
   * Applies runner messages (one numbered message, or a `batch` frame's items, in order) in one
   * transaction: numbered ones once each (each in its own savepoint), live ones as events to
   * publish, acks. Then one ack up to the last seq, and one publication of everything, in order.
   */
  async #apply(ws: WebSocket, items: BatchItem[]): Promise<void> {
    const { limits } = (await this.#p.runtime()).config;
    const at = now();
    type Done = { out: (LoggedEvent | Event)[]; applied: { m: NumberedUp; a: Applied }[]; failed?: { m: NumberedUp; e: unknown }; gap?: true };
    const done = this.#p.state.storage.transactionSync((): Done => {
      const d: Done = { out: [], applied: [] };
      for (const m of items) {
        if (m.t === "ack") {
          this.#p.link.acked(m.down, false);
          continue;
        }
        if (m.t === "delta" || m.t === "progress") {
          const e = this.#p.turns.live(m, at);
          if (e) d.out.push(e);
          continue;
        }
        let a;
        try {
          a = this.#p.turns.apply(m, at, limits.session_bytes);
        } catch (e) {
          // That message alone was rolled back; what came before it in the frame stays applied.
          return { ...d, failed: { m, e } };
        }
        // Seqs in a frame are consecutive, so a gap can only be at its first new message.
        if (a === "gap") return { ...d, gap: true };
        if (a === "duplicate") continue;
        d.applied.push({ m, a });
        d.out.push(...a.events);
      }
      return d;
    });
    const last = items.findLast((m) => "seq" in m) as NumberedUp | undefined;
    this.#p.publication.publish(done.out);
    if (done.failed) {
      // A local write failure (a record over 4 MiB, a full log, storage trouble): the turn fails
      // and the frame counts as applied, so the runner-host's resend is not retried forever.
      const { m, e } = done.failed;
      log("error", "could not record a runner message", { session_id: this.#p.state.row()?.id, t: m.t, error: String(e) });
      this.#p.state.set({ up_seq: Math.max(this.#p.state.require().up_seq, last!.seq) });
      this.#p.link.ackUp(ws, last!.seq);
      this.#p.work.loseRunner(`local write failure: ${e instanceof Error ? e.message : String(e)}`);
      await this.#p.work.afterChange();
      return;
    }
    if (done.gap) return ws.close(1008, "link sequence gap");
    if (last) this.#p.link.ackUp(ws, Math.min(last.seq, this.#p.state.require().up_seq));
    if (done.applied.length === 0) return;
    for (const { m, a } of done.applied) {
      // Only a call recorded as its turn's `tool.call` goes out: one for a turn already stopped is
      // dropped (`turns.ts`), and its executor must not run what the session never shows.
      if (m.t === "tool_call" && m.dispatched && a.events.length > 0) await this.#p.calls.dispatch(m.call.id, m.call.name, m.call.arguments);
    }
    const applied = done.applied.map((x) => x.a);
    if (applied.some((a) => a.detached)) this.#p.state.storage.transactionSync(() => this.#p.link.release("runner-host detached"));
    if (applied.some((a) => a.opened || a.next || a.detached)) await this.#p.work.schedule();
    if (applied.some((a) => a.events.length > 0)) await this.#p.work.pushIndex();
  }

  /** A (re)connected link: the first hello of a lease opens; a later one resends what is unacked. */
  async #hello(down: number): Promise<void> {
    const rt = await this.#p.runtime();
    this.#p.state.set({ link_lost_at: null });
    if (this.#p.state.require().link_state === "requested") return this.#open();
    this.#p.link.acked(down, true, rt);
    // An input that arrived while the link was lost waited for it.
    await this.#p.work.schedule();
  }

  /** First hello of a lease: send what to open (config, provider key, native state). */
  async #open(): Promise<void> {
    const rt = await this.#p.runtime();
    const row = this.#p.state.require();
    const messages = openMessages(rt, row, this.#p.turns);
    if ("error" in messages) {
      this.#p.work.loseRunner(messages.error);
      return this.#p.work.afterChange();
    }
    try {
      this.#p.state.storage.transactionSync(() => {
        this.#p.state.set({ link_state: "opening" });
        for (const m of messages) this.#p.link.push(m, rt);
      });
    } catch (e) {
      // Not stored (a message past the platform's row cap, a full disk): the runner-host would wait
      // for an open that never comes, and the input with it.
      await this.#p.work.failUnstored("session could not be opened: its open messages were not stored", e, "the session could not be opened on a runner-host");
    }
  }
}
