/**
 * The grace a lost runner link gets: the runner-host may dial back within LINK_GRACE_MS (after a
 * deploy, an object restart, a network blip) and keep the session and its turn; after that, the
 * lease is dropped: a running turn fails (and the queue with it), input that only waited is placed
 * anew.
 *
 * Storage layout / lifecycle: `session.link_lost_at` (ms since epoch) is set when the link is
 * found lost, and cleared by the runner-host's hello (runner-messages.ts) or when the lease is let
 * go (runner-link.ts); the object's alarm, armed for the grace's end, checks it.
 */
import type { SessionRow } from "./record.ts";

/**
 * How long a dropped runner link may stay away while work is pending before the turn fails, ms:
 * long enough for a runner-host to reconnect after a deploy or object restart, short enough that
 * a lost runner-host surfaces quickly.
 */
export const LINK_GRACE_MS = 10_000;

/**
 * While a turn runs, how often the object wakes to look at its link, ms. When the service's own
 * process stops (a local stack restart, a crash), the link ends with no `webSocketClose`, and no
 * request may come to wake the object: its turn would show `running` for ever. The alarm does;
 * the new instance finds no socket (`noticeLost`) and the grace runs. Long enough that most turns
 * end before it (one alarm write per busy session per period at most).
 */
export const RUNNING_WATCH_MS = 30_000;

/** `S`: the runner socket's type (a Workers WebSocket in the object). */
export type LinkGraceParts<S> = {
  /** The session row (session-state.ts). */
  state: { row(): SessionRow | undefined; set(fields: Partial<SessionRow>): void };
  /** The current lease's open socket, and a socket's lease (runner-link.ts). */
  link: { socket(): S | undefined; leaseOf(ws: S): number };
  /** Arms the object's alarm for `at` (ms since epoch) unless it is due sooner. */
  arm: (at: number) => Promise<void>;
  /** The runner-host is gone: the running turn fails, the lease is dropped (scheduler.ts). */
  lose: (message: string) => void;
  /** Whether a turn runs (turns.ts). */
  running: () => boolean;
};

export class LinkGrace<S> {
  readonly #p: LinkGraceParts<S>;

  constructor(parts: LinkGraceParts<S>) {
    this.#p = parts;
  }

  /**
   * A new instance whose runner link was up has no socket: the process that held it stopped (a
   * crash, a restart longer than the runner-host waits), and `webSocketClose` never ran. The link
   * gets the grace period a dropped socket gets; a runner-host that dials back in time keeps it.
   * A link still `requested` has not been dialled yet, which is not a loss.
   */
  async noticeLost(): Promise<void> {
    const { state, link } = this.#p;
    const row = state.row();
    if (!row || (row.link_state !== "opening" && row.link_state !== "open") || row.link_lost_at || link.socket()) return;
    state.set({ link_lost_at: Date.now() });
    await this.#p.arm(Date.now() + LINK_GRACE_MS);
  }

  /** A runner socket closed: when it was the current lease's link, the grace starts. */
  async closed(ws: S): Promise<void> {
    const { state, link } = this.#p;
    const row = state.row();
    if (!row || row.lease !== link.leaseOf(ws) || row.link_state === "none" || link.socket()) return;
    // The link may come back (a blip); if it does not within the grace period, the work fails.
    state.set({ link_lost_at: Date.now() });
    await this.#p.arm(Date.now() + LINK_GRACE_MS);
  }

  /** A turn started: the object wakes within RUNNING_WATCH_MS while it runs (see there). */
  watch(): Promise<void> {
    return this.#p.arm(Date.now() + RUNNING_WATCH_MS);
  }

  /**
   * At the alarm: a link still away past its grace loses the runner-host; within it, the alarm
   * waits on. A turn still running on a live link keeps the watch.
   */
  async check(): Promise<void> {
    const row = this.#p.state.row();
    if (row?.link_lost_at && !this.#p.link.socket()) {
      const due = row.link_lost_at + LINK_GRACE_MS;
      if (Date.now() >= due) {
        this.#p.lose("the runner-host running this session was lost (its link did not come back)");
      } else {
        await this.#p.arm(due);
      }
    } else if (this.#p.running()) {
      await this.watch();
    }
  }
}
