/**
 * SyncBacklog: the deployment's count of sessions waiting to upload (spec "Limits": a full
 * persistence queue gives `429 overloaded` on new writes and `503` on readiness).
 *
 * A session joins when it first has something to upload and leaves when storage has caught up, so
 * this object sees two calls per dirty period of a session, not one per event. `enter` without
 * `force` is the admission check for new writes; work already running (a turn's events) always
 * enters.
 *
 * Startup scan: when this object starts (a process start in the local stack, an eviction when
 * deployed) it wakes every queued session, which re-arms its upload alarm or leaves the queue;
 * readiness stays `503` until that scan has finished.
 *
 * It also holds the deployment's metric totals between two reads by a runner-host (in memory: a
 * restart loses at most one export interval of counts).
 *
 * Storage layout: `queued(name, since)` (migrations/sync_backlog).
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import { log } from "../log.ts";
import { migrate } from "../storage/migrate.ts";
import m0001 from "../../migrations/sync_backlog/0001_init.sql";
import { MAX_DURATION_SAMPLES, type WorkerMetrics } from "../shared/metrics-protocol.ts";
import type { MetricDelta } from "../worker-metrics.ts";

export const BACKLOG_NAME = "sync-backlog";
/** Sessions the startup scan wakes at once. */
const SCAN_CONCURRENCY = 8;

export type BacklogStatus = { pending: number; scanned: boolean };

export class SyncBacklog extends DurableObject<Env> {
  #scan: Promise<void> | undefined;
  #scanned = false;
  #metrics: MetricDelta = { transcript_bytes: 0, sync_duration_ms: [], sync_failures: 0 };

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage, [m0001]);
  }

  #count(): number {
    return this.ctx.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM queued").one().n;
  }

  /** Joins the queue; false (and nothing recorded) when `limit` sessions already wait and not `force`. */
  enter(name: string, limit: number, force: boolean): boolean {
    const sql = this.ctx.storage.sql;
    if (sql.exec("SELECT 1 FROM queued WHERE name = ?", name).toArray().length > 0) return true;
    if (!force && this.#count() >= limit) return false;
    sql.exec("INSERT INTO queued (name, since) VALUES (?, ?)", name, Date.now());
    return true;
  }

  /** Leaves the queue; `metrics`: the leaving isolate's counts, carried along (src/worker-metrics.ts). */
  leave(name: string, metrics?: MetricDelta): void {
    this.ctx.storage.sql.exec("DELETE FROM queued WHERE name = ?", name);
    if (metrics) this.addMetrics(metrics);
  }

  /** Starts the startup scan on the first call of this object's life. */
  status(): BacklogStatus {
    this.#scan ??= this.#runScan();
    return { pending: this.#count(), scanned: this.#scanned };
  }

  addMetrics(d: MetricDelta): void {
    this.#metrics.transcript_bytes += d.transcript_bytes;
    this.#metrics.sync_failures += d.sync_failures;
    const room = MAX_DURATION_SAMPLES - this.#metrics.sync_duration_ms.length;
    this.#metrics.sync_duration_ms.push(...d.sync_duration_ms.slice(0, Math.max(0, room)));
  }

  /** The totals since the last read, and the current backlog; the totals start again from zero. */
  drainMetrics(): WorkerMetrics {
    const m = this.#metrics;
    this.#metrics = { transcript_bytes: 0, sync_duration_ms: [], sync_failures: 0 };
    return { sync_pending: this.#count(), ...m };
  }

  async #runScan(): Promise<void> {
    const names = this.ctx.storage.sql.exec<{ name: string }>("SELECT name FROM queued ORDER BY since").toArray().map((r) => r.name);
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
