/**
 * The requests this isolate is still answering, so the local stack's shutdown lets them finish
 * before it stops the runtime (docs/api.md "Shutdown and readiness"): a flush in the middle of its
 * upload round, or a read loading a session, answers instead of losing its connection.
 *
 * A request counts from the moment it reaches the app until its handler returned a response: an
 * event or command stream counts only until it opened (streams end in `OpenStreams.endAll`), a
 * WebSocket until its upgrade was answered. `/internal/*` does not count: the shutdown's own
 * calls are among them.
 *
 * Lifecycle: isolate memory only.
 */
import type { MiddlewareHandler } from "hono";

export class InFlight {
  #count = 0;
  #idle: (() => void)[] = [];

  get size(): number {
    return this.#count;
  }

  /** How many `settled` calls are waiting. */
  get waiting(): number {
    return this.#idle.length;
  }

  /** Runs `work` as one request. */
  async track<T>(work: () => Promise<T>): Promise<T> {
    this.#count++;
    try {
      return await work();
    } finally {
      if (--this.#count === 0) for (const wake of this.#idle.splice(0)) wake();
    }
  }

  /** Waits until no request is in flight, at most `ms`; answers how many still were then. */
  async settled(ms: number): Promise<{ left: number }> {
    if (this.#count > 0) {
      let wake!: () => void;
      const woken = new Promise<void>((resolve) => (wake = resolve));
      this.#idle.push(wake);
      const timer = setTimeout(wake, ms);
      await woken;
      clearTimeout(timer);
      // Woken by the timer, it leaves the waiters: each shutdown's waiter would stay until idle.
      this.#idle = this.#idle.filter((w) => w !== wake);
    }
    return { left: this.#count };
  }
}

export const inFlight = new InFlight();

export const trackInFlight: MiddlewareHandler = (c, next) => (c.req.path.startsWith("/internal/") ? next() : inFlight.track(next));
