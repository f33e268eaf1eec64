/**
 * The session object's one alarm, armed for the soonest moment anything asked for: the runner
 * link's grace and a running turn's watch (link-grace.ts), a deferred tenant-index push
 * (index-push.ts), persistence (session-sync.ts).
 *
 * Lifecycle: the alarm's time is kept in memory once read or set, so arming for a later moment
 * than the alarm already has reads nothing. Every turn's start arms the watch and every deferred
 * push its backstop, and reading the runtime's alarm store each time was ~1–2% of the objects' CPU
 * under load (bench/RESULTS.md, sixteenth and seventeenth sessions). This instance is the only
 * writer of the alarm; what it does not see is the runtime consuming it (an alarm that fires is
 * gone unless its handler arms another, and a failed handler is retried by the runtime), so the
 * time is forgotten when the handler starts and when it fails, and read again on the next arm.
 */
export type AlarmStore = {
  getAlarm(): Promise<number | null>;
  setAlarm(at: number): Promise<void>;
};

export class AlarmClock {
  readonly #store: AlarmStore;
  /** The alarm's time (ms since epoch), null for none, undefined when it must be read. */
  #known: number | null | undefined;

  constructor(store: AlarmStore) {
    this.#store = store;
  }

  /** Arms the alarm for `at` (ms since epoch) unless it is due sooner. */
  async arm(at: number): Promise<void> {
    if (this.#known === undefined) {
      const read = await this.#store.getAlarm();
      // Another arm may have set it while this one read: what it set is newer than the read.
      if (this.#known === undefined) this.#known = read;
    }
    if (this.#known !== null && this.#known <= at) return;
    // Known before the write lands, so an arm for a later moment meanwhile does not overwrite it.
    this.#known = at;
    try {
      await this.#store.setAlarm(at);
    } catch (e) {
      this.#known = undefined;
      throw e;
    }
  }

  /** Runs the alarm handler `fn`: the fired alarm's time is forgotten before it, and again if it fails. */
  async firing(fn: () => Promise<void>): Promise<void> {
    this.#known = undefined;
    try {
      await fn();
    } catch (e) {
      this.#known = undefined;
      throw e;
    }
  }
}
