/**
 * The session's summary in its tenant's index (the TenantObject serves `GET /sessions` from it):
 * when it is pushed there.
 *
 * Pushes are at least INDEX_INTERVAL_MS apart unless `urgent`: a change inside the interval is
 * left to a timer at its end, which pushes whatever the row is then (one push for a turn's
 * `running` and `idle`, or for a burst of turns). An urgent push is written at once (its change is
 * answered once the list shows it); any other is gathered: the TenantObject writes it with the
 * other sessions' pushes of the next moment in one commit. A push that fails is retried by an
 * alarm until it lands.
 *
 * A timer, not the object's alarm: an alarm is durable, so arming one and its firing are two
 * writes to the runtime's alarm store, each a commit with its own `fsync` in the local stack, one
 * pair per busy session per second (bench/RESULTS.md, tenth session). The timer dies with the
 * instance, so a deferral also makes sure an alarm comes within INDEX_BACKSTOP_MS, which a running
 * turn's watch (link-grace.ts) already does without a write.
 *
 * Storage layout / lifecycle: what is owed is durable (`session.indexed_version` < `version`), so
 * an eviction before the timer only delays the push to the backstop alarm or the object's next
 * wake. Memory holds when this instance last pushed, its pending timer and the TenantObject's stub.
 */
import { log } from "../log.ts";
import { RUNNING_WATCH_MS } from "./link-grace.ts";
import { sessionJson, type SessionRow } from "./record.ts";

/** Retry delay for a tenant-index push that failed, ms. Only armed while the index is behind. */
export const INDEX_RETRY_MS = 2_000;
/**
 * Shortest time between two tenant-index pushes of one session that nobody waits on (turn starts
 * and ends, a runner-host lost), ms. A list may show a busy session up to this much behind; a
 * quiet session's change is pushed at once. Creates, closes, resumes, restores, loads and
 * rebinds are pushed before they are answered, whatever the interval.
 */
export const INDEX_INTERVAL_MS = 1_000;
/**
 * While a push waits on this instance's timer, the object's alarm comes within this long, ms, in
 * case the instance goes first. A running turn's watch, so that its alarm serves: a busy session's
 * deferred pushes arm nothing new.
 */
export const INDEX_BACKSTOP_MS = RUNNING_WATCH_MS;

/** What a push needs of the TenantObject (its stub fits). */
export type TenantIndex = {
  /** `body`: the Session as JSON text (record.ts `sessionJson`). */
  upsert(id: string, version: number, body: string, tenant?: string): Promise<unknown>;
  /** The same, written with other sessions' pushes in one commit a moment later (TenantObject). */
  gather(id: string, version: number, body: string, tenant?: string): Promise<unknown>;
};

export type IndexPushParts = {
  /** The session row, and where the version the index holds is recorded (session-state.ts). */
  state: { row(): SessionRow | undefined; markIndexed(version: number): void };
  /** Arms the object's alarm for `at` (ms since epoch) unless it is due sooner. */
  arm: (at: number) => Promise<void>;
  /** The tenant's index object, by tenant. */
  index: (tenant: string) => TenantIndex;
};

export class IndexPush {
  readonly #state: IndexPushParts["state"];
  readonly #arm: IndexPushParts["arm"];
  readonly #index: IndexPushParts["index"];
  /** When this instance last pushed to the tenant index (ms since epoch; 0: not yet). */
  #lastPush = 0;
  /** The push left to the end of the interval, if one is. */
  #timer: ReturnType<typeof setTimeout> | undefined;
  #tenantStub: { tenant: string; stub: TenantIndex } | undefined;

  constructor(o: IndexPushParts) {
    this.#state = o.state;
    this.#arm = o.arm;
    this.#index = o.index;
  }

  /**
   * Pushes the current summary to the tenant index when it is behind; on failure an alarm retries.
   * `urgent`: now, whatever the push interval (the change is pushed before it is answered).
   */
  async push(urgent = false): Promise<void> {
    const row = this.#state.row();
    if (!row || row.indexed_version >= row.version) return;
    const due = this.#lastPush + INDEX_INTERVAL_MS;
    if (!urgent && Date.now() < due) return this.#later(due);
    this.#lastPush = Date.now();
    try {
      const index = this.#tenantIndex(row.tenant);
      const body = sessionJson(row);
      // Only an urgent push is written at once; any other shares the tenant's next commit.
      await (urgent ? index.upsert(row.id, row.version, body, row.tenant) : index.gather(row.id, row.version, body, row.tenant));
      this.#state.markIndexed(row.version);
    } catch (e) {
      log("warn", "tenant index push failed", { session_id: row.id, error: String(e) });
      await this.#arm(Date.now() + INDEX_RETRY_MS);
    }
  }

  /** `push()` that nobody awaits: a failure that even its retry alarm could not arm is logged. */
  pushInBackground(): void {
    this.push().catch((e) => log("warn", "tenant index push failed", { session_id: this.#state.row()?.id, error: String(e) }));
  }

  /**
   * Leaves the push to a timer at `due` (one for every change until then), with the backstop alarm
   * armed when the timer is set: a later change inside the interval finds both in place (arming
   * reads the alarm store, ~2% of the objects' CPU under load when every change did).
   */
  #later(due: number): Promise<void> {
    if (this.#timer !== undefined) return Promise.resolve();
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.pushInBackground();
    }, due - Date.now());
    return this.#arm(Date.now() + INDEX_BACKSTOP_MS);
  }

  /** The TenantObject's stub, made once per instance: naming an object hashes its name. */
  #tenantIndex(tenant: string): TenantIndex {
    if (this.#tenantStub?.tenant !== tenant) this.#tenantStub = { tenant, stub: this.#index(tenant) };
    return this.#tenantStub.stub;
  }
}
