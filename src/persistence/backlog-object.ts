/**
 * SyncBacklog: the deployment's count of sessions waiting to upload (docs/configuration.md
 * "Persistence": a full `persistence.queue` gives `429 overloaded` on new writes and `503` on
 * readiness).
 *
 * A session joins when it first has something to upload and leaves when storage has caught up, so
 * this object sees two calls per dirty period of a session, not one per event. `enter` without
 * `force` is the admission check for new writes; work already running (a turn's events) always
 * enters.
 *
 * Startup scan: when this object starts (a process start, or after an eviction: workerd evicts
 * an object idle for seconds) it wakes every queued session, which re-arms its upload alarm or
 * leaves the queue; readiness stays `503` until that scan has finished. An empty queue is scanned
 * at once and a probe waits up to SCAN_WAIT_MS for a short one, so an eviction of an idle
 * deployment's object never shows as not ready.
 *
 * It records `svc.sync.pending` (the gauge of sessions waiting) whenever the count changes and on
 * each readiness probe, and exports it like every object does (src/metrics).
 *
 * Storage layout: `queued(name, since, tenant)` (migrations/sync_backlog).
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import { log } from "../log.ts";
import { migrate } from "../storage/migrate.ts";
import m0001 from "../../migrations/sync_backlog/0001_init.sql";
import m0002 from "../../migrations/sync_backlog/0002_tenant.sql";
import { scheduleExport } from "../metrics/exporter.ts";
import { tenantOfObjectName } from "../session/object-name.ts";
import { metrics } from "../metrics/registry.ts";

export const BACKLOG_NAME = "sync-backlog";
/**
 * Sessions the startup scan wakes at once: each wake is a storage round trip, so a few in flight
 * hide the latency, and few enough that a large backlog does not crowd out requests at start.
 */
const SCAN_CONCURRENCY = 8;
/**
 * How long a readiness probe waits for a scan in progress, ms: a queue of a few sessions is
 * scanned well within it; a long one (a restart with many sessions waiting) is `503` until done.
 */
const SCAN_WAIT_MS = 1_000;

export type BacklogStatus = { pending: number; scanned: boolean };

export class SyncBacklog extends DurableObject<Env> {
  #scan: Promise<void> | undefined;
  #scanned = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage, [m0001, m0002]);
  }

  #count(): number {
    return this.ctx.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM queued").one().n;
  }

  /** `svc.sync.pending` now; returns the count. */
  #recordPending(): number {
    const n = this.#count();
    metrics.gauge("svc.sync.pending").set(n);
    scheduleExport(this.env, (p) => this.ctx.waitUntil(p));
    return n;
  }

  /**
   * Joins the queue. Unless `force`, nothing is recorded when `limit` sessions already wait
   * (`queue_full`) or `share` of the session's tenant's (`share_full`): one tenant cannot fill the
   * queue, which would refuse every tenant's writes and take readiness down.
   */
  enter(name: string, limit: number, share: number, force: boolean): "entered" | "queue_full" | "share_full" {
    const sql = this.ctx.storage.sql;
    const tenant = tenantOfObjectName(name);
    if (sql.exec("SELECT 1 FROM queued WHERE name = ?", name).toArray().length > 0) return "entered";
    if (!force && this.#count() >= limit) return "queue_full";
    if (!force && sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM queued WHERE tenant = ?", tenant).one().n >= share) return "share_full";
    sql.exec("INSERT INTO queued (name, since, tenant) VALUES (?, ?, ?)", name, Date.now(), tenant);
    this.#recordPending();
    return "entered";
  }

  leave(name: string): void {
    this.ctx.storage.sql.exec("DELETE FROM queued WHERE name = ?", name);
    this.#recordPending();
  }

  /** Starts the startup scan on the first call of this object's life, and waits a little for it. */
  async status(): Promise<BacklogStatus> {
    this.#scan ??= this.#runScan();
    if (!this.#scanned) await Promise.race([this.#scan, new Promise((resolve) => setTimeout(resolve, SCAN_WAIT_MS))]);
    return { pending: this.#recordPending(), scanned: this.#scanned };
  }

  async #runScan(): Promise<void> {
    const names = this.ctx.storage.sql.exec<{ name: string }>("SELECT name FROM queued ORDER BY since").toArray().map((r) => r.name);
    if (names.length === 0) {
      this.#scanned = true; // before the first await: the probe that started it sees it done
      return;
    }
    let next = 0;
    const worker = async () => {
      while (next < names.length) {
        const name = names[next++]!;
        try {
          await this.env.SESSIONS.getByName(name).syncKick();
        } catch (e) {
          log("warn", "sync scan could not wake a session", { error: String(e) });
        }
      }
    };
    await Promise.all(Array.from({ length: SCAN_CONCURRENCY }, worker));
    this.#scanned = true;
    log("info", "sync startup scan finished", { sessions: names.length });
  }
}
