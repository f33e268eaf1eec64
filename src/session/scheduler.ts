/**
 * What follows a committed change of the session, in this order: the events it appended are
 * published (publication.ts) before any await, so publication order is commit order; then work
 * moves on: the session is placed on a runner-host (placement.ts), or its next queued turn starts
 * on the runner link; then persistence notes the change and the tenant index gets the new summary
 * (index-push.ts).
 *
 * Lifecycle: no state of its own. The queue and the running turn are in SQLite (turns.ts), the
 * lease and the link's state in the session row (runner-link.ts).
 */
import { asResultAsync, type Result } from "../shared/errors.ts";
import { log } from "../log.ts";
import type { Runtime } from "../runtime.ts";
import { now } from "./clock.ts";
import type { IndexPush } from "./index-push.ts";
import { sessionObjectName } from "./object-name.ts";
import { runGrant } from "./open-message.ts";
import type { Placement } from "./placement.ts";
import type { Publication } from "./publication.ts";
import type { RunnerLink } from "./runner-link.ts";
import type { Change, SessionState } from "./session-state.ts";
import type { LoggedEvent } from "./event-log.ts";
import type { ProviderGrant } from "../shared/runner-protocol.ts";
import type { Turns } from "./turns.ts";

export type SchedulerParts = {
  state: Pick<SessionState, "row" | "require" | "storage" | "endWork">;
  turns: Pick<Turns, "running" | "hasQueued" | "start" | "failNext">;
  link: Pick<RunnerLink, "newLease" | "socket" | "push" | "release">;
  placement: Pick<Placement, "place" | "claim" | "withdraw">;
  publication: Pick<Publication, "publish">;
  index: Pick<IndexPush, "push" | "pushInBackground">;
  /** Persistence notes a change (SessionSync.changed): dirty, an upload alarm, the backlog. */
  changed: () => Promise<void>;
  /** A turn started: the object's alarm watches its link while it runs (link-grace.ts). */
  watch: () => Promise<void>;
  runtime: () => Promise<Runtime>;
};

export class Scheduler {
  /** The narrow parts it works with (one field: they are all the object's, wired once). */
  readonly #p: SchedulerParts;
  /** The placement a message is waiting for (`placeForMessage`); messages meanwhile share its answer. */
  #claim: Promise<boolean> | undefined;

  constructor(parts: SchedulerParts) {
    this.#p = parts;
  }

  /**
   * Runs a state change, publishes what it appended, moves work on, updates the tenant index
   * (`urgent`: before answering, whatever the push interval).
   */
  async commit<T>(urgent: boolean, fn: () => Change<T>): Promise<Result<T>> {
    return asResultAsync(async () => {
      const change = fn();
      this.#p.publication.publish(change.events);
      await this.schedule();
      if (change.events.length > 0) await this.pushIndex(urgent);
      return change.value;
    });
  }

  async afterChange(): Promise<void> {
    await this.schedule();
    await this.pushIndex();
  }

  /**
   * Persistence notes the change, then the tenant index gets the summary (index-push.ts). Only an
   * urgent push holds the caller; any other is for a list, which shows it a moment later (and a busy
   * session up to the push interval late), so a message's `202` does not wait on the tenant's object.
   */
  async pushIndex(urgent = false): Promise<void> {
    await this.#p.changed();
    if (urgent) return this.#p.index.push(true);
    this.#p.index.pushInBackground();
  }

  /** Moves work forward: places the session on a runner-host, or starts the next queued turn. */
  async schedule(): Promise<void> {
    // The runtime first: from reading the row to the change it decides on, nothing awaits.
    const rt = await this.#p.runtime();
    const row = this.#p.state.row();
    if (!row || row.status === "closed" || row.status === "interrupted" || row.status === "failed") return;
    const running = this.#p.turns.running();
    if (!running && !this.#p.turns.hasQueued()) return;
    if (running && row.link_state !== "none") return; // the turn goes on where it runs
    // Placing the session or starting a turn needs what the configuration grants now.
    const grant = runGrant(rt, row);
    if (typeof grant === "string") return this.#failBlocked(grant);
    if (row.link_state === "none") {
      const lease = this.#p.state.storage.transactionSync(() => this.#p.link.newLease());
      await this.#p.placement.place(sessionObjectName(row.tenant, row.id), lease, row.harness, rt.config);
      return;
    }
    if (row.link_state !== "open") return;
    // The link is lost (its runner-host may be gone): the input waits, queued, for the runner-host
    // to dial back (hello starts it) or for the grace to run out (the session is placed anew). A
    // turn started now would fail with the link, though it never reached any runner-host.
    if (row.link_lost_at && !this.#p.link.socket()) return;
    let events: LoggedEvent[] | undefined;
    try {
      events = this.#startTurn(rt, grant);
    } catch (e) {
      // Not stored (a `run` past the platform's row cap: text that grows past 2 MB as JSON).
      return this.failUnstored("a turn could not start: its run message was not stored", e, "the turn could not be started");
    }
    if (!events) return;
    if (events.length > 0) {
      this.#p.publication.publish(events);
      await this.pushIndex();
    }
    // Also a turn that starts again with its status already `running` (a yielded one placed anew).
    await this.#p.watch();
  }

  /** Starts the next queued turn and sends its `run`, in one transaction; undefined when nothing is queued. */
  #startTurn(rt: Runtime, grant: ProviderGrant): LoggedEvent[] | undefined {
    return this.#p.state.storage.transactionSync(() => {
      const s = this.#p.turns.start(now());
      if (!s) return undefined;
      this.#p.link.push({
        t: "run",
        turn: s.input.event_id,
        text: s.input.text,
        traceparent: s.input.traceparent ?? undefined,
        accepted_at: Date.parse(s.input.accepted_at),
        provider: grant,
      }, rt);
      return s.events;
    });
  }

  /**
   * The configuration changed under the session (`runGrant`): its input fails now — the running or
   * first queued input with `service_error` naming the cause, the rest with `conflict` — and the
   * session is `failed`, instead of being placed again and again or waiting for a runner-host
   * that will never take it. Once the configuration has what it needs, a resume and a new message
   * go on from there.
   */
  async #failBlocked(message: string): Promise<void> {
    log("warn", "session cannot run under the configuration", { session_id: this.#p.state.row()?.id, reason: message });
    await this.#failInput(message);
  }

  /**
   * A link message that starts work (a lease's open, a turn's run) could not be stored: the input
   * would wait for good for it. The input fails as a blocked one does, and the log says why.
   */
  async failUnstored(what: string, error: unknown, message: string): Promise<void> {
    log("error", what, { session_id: this.#p.state.row()?.id, error: error instanceof Error ? error.message : String(error) });
    await this.#failInput(message);
  }

  async #failInput(message: string): Promise<void> {
    const waiting = this.#p.state.require().link_state === "requested";
    const events = this.#p.state.storage.transactionSync(() => {
      const ended = this.#p.turns.failNext(now(), message);
      if (this.#p.state.require().link_state !== "none") this.#p.link.release(message);
      return ended;
    });
    this.#p.publication.publish(events);
    if (waiting) await this.withdraw();
    await this.pushIndex();
  }

  /**
   * After an interrupt: a session whose link never opened (its open waits on its runner-host, or
   * it waits to be placed) has nothing left to run there, and lets it go, so it holds no
   * `limits.loaded` slot until its open would have come (a resume lets it go in any case).
   */
  async letGoUnopened(): Promise<void> {
    const row = this.#p.state.row();
    if (!row || (row.link_state !== "requested" && row.link_state !== "opening") || this.#p.turns.running() || this.#p.turns.hasQueued()) return;
    const waiting = row.link_state === "requested";
    this.#p.state.storage.transactionSync(() => this.#p.link.release("nothing left to run"));
    if (waiting) await this.withdraw();
  }

  /** The runner-host is gone: a running turn fails, the lease is dropped. */
  loseRunner(message: string): void {
    const events = this.#p.state.storage.transactionSync(() => {
      const out = this.#p.turns.running()
        ? this.#p.state.endWork(now(), "failed", { running: { code: "service_error", message }, queued: "the session failed" })
        : [];
      this.#p.link.release(message);
      return out;
    });
    this.#p.publication.publish(events);
  }

  /** The session waited for a runner-host and needs none now: every region's pool forgets it. */
  async withdraw(): Promise<void> {
    const row = this.#p.state.require();
    const name = sessionObjectName(row.tenant, row.id);
    const { config } = await this.#p.runtime();
    await this.#p.placement.withdraw(name, row.lease, config);
  }

  /** An idle session on no runner-host: a message to it needs it placed (`placeForMessage`). */
  needsPlacement(): boolean {
    if (this.#claim) return true;
    const row = this.#p.state.row();
    return !!row && row.status === "idle" && row.link_state === "none" && !this.#p.turns.running();
  }

  /**
   * A message to an idle session that is not placed: places it before the message is committed
   * (placement.ts `claim`: the room check and the attach are one step in the pool), so when no
   * runner-host can take it the message is refused with nothing recorded, and an accepted one
   * never waits for room a check saw. False: refuse it (`429`).
   */
  placeForMessage(): Promise<boolean> {
    // Messages sent together to an unplaced session get one answer: all placed, or all refused
    // (before, one sent while the first one's placement was asked was accepted, and waited).
    this.#claim ??= this.#placeForMessage().finally(() => (this.#claim = undefined));
    return this.#claim;
  }

  /** Resolves once no message's placement is in flight (close and interrupt judge the link after it). */
  async claimSettled(): Promise<void> {
    await this.#claim?.catch(() => undefined);
  }

  async #placeForMessage(): Promise<boolean> {
    const row = this.#p.state.require();
    const { config } = await this.#p.runtime();
    const lease = this.#p.state.storage.transactionSync(() => this.#p.link.newLease());
    let placed: boolean | undefined;
    try {
      placed = await this.#p.placement.claim(sessionObjectName(row.tenant, row.id), lease, row.harness, config);
      return placed;
    } finally {
      if (!placed) {
        // Refused, or the pool could not be asked: the session is not being placed (a lease left
        // `requested` with no pool holding it would never be placed again). A message committed
        // meanwhile (it found the session being placed) still needs a placement.
        this.#p.state.storage.transactionSync(() => this.#p.link.release("no runner-host has room"));
        await this.schedule().catch((e: unknown) => log("warn", "could not place a waiting message", { error: String(e) }));
      }
    }
  }
}
