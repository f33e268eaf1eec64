/**
 * Persistence for one SessionObject: when to upload (the object's alarm, every `interval_seconds`
 * while something is not uploaded, with backoff after failures), flush, sync status, restore and
 * load. The object calls in here and stays thin; the upload itself is `Uploader`, the download
 * `importer`.
 *
 * Lifecycle: a change marks the session dirty (`sync.dirty_at`) and enters the deployment's
 * SyncBacklog; an upload round that leaves nothing behind marks it clean and leaves the backlog.
 * One round runs at a time per object (`#running`): the alarm, a flush and a restore wait on it.
 */
import type { Env } from "../env.ts";
import { log } from "../log.ts";
import { scheduleExport, type KeepAlive } from "../metrics/exporter.ts";
import { metrics } from "../metrics/registry.ts";
import { getRuntime } from "../runtime.ts";
import type { HostConfig, Persistence } from "../shared/config-schema.ts";
import type { SyncStatus } from "../shared/sync-schema.ts";
import { asResultAsync, conflict, notFound, overloaded, unsupported, type Result } from "../shared/errors.ts";
import { sessionObjectName } from "../session/object-name.ts";
import { configuredTenants, tenantShare } from "../tenant/share.ts";
import type { SessionState } from "../session/session-state.ts";
import { BACKLOG_NAME } from "./backlog-object.ts";
import { apply, checkManifestAgainstLocal, checkManifestFor, download, endsClosed } from "./importer.ts";
import { Layout } from "./layout.ts";
import { parseManifest } from "./manifest.ts";
import { openStore } from "./open-store.ts";
import type { ObjectStore } from "./store.ts";
import { strays } from "./strays.ts";
import { behind, Uploader, type Published, type SyncRow } from "./uploader.ts";

/** docs/api.md "Flush, sync, restore": flush waits at most 30 s for what was local when it was called. */
export const FLUSH_WAIT_MS = 30_000;
/** Longest wait between retries after failures, ms: an outage is retried at least every 5 minutes. */
export const MAX_BACKOFF_MS = 5 * 60_000;

type Ctx = { p: Persistence; store: ObjectStore; layout: Layout; up: Uploader };

/**
 * Where uploads go: the provider, bucket, endpoint, directory and prefix (not the region or the
 * credentials, which reach the same objects). A session's upload state holds only for this one.
 */
export function storageIdentity(p: Persistence): string {
  return JSON.stringify([p.provider, p.bucket ?? "", p.endpoint ?? "", p.directory ?? "", p.prefix]);
}

export class SessionSync {
  readonly #env: Env;
  readonly #state: SessionState;
  readonly #arm: (at: number) => Promise<void>;
  readonly #keepAlive: KeepAlive;
  #running: Promise<unknown> = Promise.resolve();
  #restoring = false;

  /** `keepAlive`: the object's `waitUntil`, which carries the metrics export (src/metrics). */
  constructor(o: { env: Env; state: SessionState; arm: (at: number) => Promise<void>; keepAlive: KeepAlive }) {
    this.#env = o.env;
    this.#state = o.state;
    this.#arm = o.arm;
    this.#keepAlive = o.keepAlive;
  }

  /** `svc.sync.duration` for every round, `svc.sync.failures` for a failed one. */
  #recordRound(ms: number, failed: boolean): void {
    metrics.histogram("svc.sync.duration").record(ms);
    if (failed) metrics.counter("svc.sync.failures").add(1);
    scheduleExport(this.#env, this.#keepAlive);
  }

  /** The object's name, which is how the backlog knows the session. */
  #name(): string {
    const r = this.#state.require();
    return sessionObjectName(r.tenant, r.id);
  }

  async #ctx(): Promise<Ctx | undefined> {
    const rt = await getRuntime(this.#env);
    const p = rt.config.persistence;
    if (!p) return undefined;
    const r = this.#state.require();
    this.#adoptStorage(p);
    const store = openStore(this.#env, p, rt.vars);
    const layout = await Layout.of(p.prefix, r.tenant, r.id);
    return { p, store, layout, up: new Uploader(this.#state, store, layout) };
  }

  #row(): SyncRow | undefined {
    return this.#state.storage.sql.exec<SyncRow>("SELECT * FROM sync").toArray()[0];
  }

  get #backlog() {
    return this.#env.SYNC_BACKLOG.getByName(BACKLOG_NAME);
  }

  /** Whether a new write must first be admitted to the backlog (`admit`). */
  needsAdmission(config: HostConfig): boolean {
    return !!config.persistence && !this.#row()?.queued;
  }

  /**
   * New writes: `429` when the backlog is full and this session is not already in it. True when
   * this call entered it: the caller then `settle`s once the write is done, whatever came of it.
   */
  async admit(name: string): Promise<boolean> {
    const { config } = await getRuntime(this.#env);
    const p = config.persistence;
    if (!p || !this.needsAdmission(config)) return false;
    const share = tenantShare(p.queue, configuredTenants(config));
    const entered = await this.#backlog.enter(name, p.queue, share, false);
    if (entered === "queue_full") throw overloaded(`${p.queue} sessions are waiting to upload to storage`);
    if (entered === "share_full") throw overloaded(`${share} of this tenant's sessions are waiting to upload to storage (its share of the deployment's ${p.queue})`);
    this.#ensureRow();
    this.#state.storage.sql.exec("UPDATE sync SET queued = 1");
    return true;
  }

  /**
   * Runs a write under admission (`admit`, then `work`, then `settle` if this call entered the
   * backlog): a full backlog refuses it with `429` before it runs, and a write that ends up
   * recording nothing leaves no place behind.
   */
  async admitted<T>(name: string, work: () => Promise<Result<T>>): Promise<Result<T>> {
    const entered = await asResultAsync(() => this.admit(name));
    if (!entered.ok) return entered;
    try {
      return await work();
    } finally {
      if (entered.value) await this.settle();
    }
  }

  /**
   * After an admitted write: one that left nothing to upload (a repeated key, a write refused after
   * its admission) leaves the backlog again. Nothing would arm the upload round that takes it out,
   * so its place would be held, and readiness failed with a full queue, until a later change.
   */
  async settle(): Promise<void> {
    const s = this.#row();
    if (!s?.queued || s.dirty_at !== null || (this.#state.row() && behind(this.#state))) return;
    await this.#leaveIfQueued(s);
  }

  #ensureRow(): void {
    this.#state.storage.sql.exec("INSERT OR IGNORE INTO sync (one) VALUES (1)");
  }

  /**
   * The upload state describes one storage (`storageIdentity`). After the deployment's storage
   * changed, nothing this session uploaded is in the new one, so the state starts over and the
   * next round uploads the whole session there (what the old storage holds stays as it is). A row
   * that never recorded its storage (written by an earlier release) takes the configured one: so
   * storage must not move in the deploy that upgrades to this release (docs/deploy.md "Upgrade").
   */
  #adoptStorage(p: Persistence): SyncRow {
    this.#ensureRow();
    const id = storageIdentity(p);
    const row = this.#row()!;
    const was = row.storage;
    if (was === id) return row;
    const sql = this.#state.storage.sql;
    this.#state.storage.transactionSync(() => {
      if (was !== null) {
        sql.exec("DELETE FROM sync_blocks");
        sql.exec("DELETE FROM sync_orphans");
        sql.exec("DELETE FROM sync_strays");
        sql.exec("UPDATE checkpoints SET native_key = NULL, native_records = NULL, native_hash = NULL, published = 0");
        sql.exec("UPDATE sync SET uploaded_offset = 0, inflight = NULL, published = NULL, latest_stale = 1, failures = 0, retry_at = NULL, error = NULL");
      }
      sql.exec("UPDATE sync SET storage = ?", id);
    });
    if (was !== null) log("info", "storage changed: the session uploads again from its start", { session_id: this.#state.row()?.id });
    return this.#row()!;
  }

  /** After a committed change: dirty, an alarm within `interval_seconds`, and in the backlog. */
  async changed(): Promise<void> {
    const { config } = await getRuntime(this.#env);
    const p = config.persistence;
    if (!p || !this.#state.row()) return;
    const s = this.#adoptStorage(p);
    if (s.dirty_at === null) {
      if (!behind(this.#state)) return;
      const now = Date.now();
      this.#state.storage.sql.exec("UPDATE sync SET dirty_at = ?", now);
      await this.#arm(s.retry_at ?? now + p.interval_seconds * 1000);
    }
    if (!s.queued) await this.#enterBacklog(p);
  }

  /**
   * The session's own record changed with no new history (a rebind): `latest.json`, which carries
   * that record, is written again at the next round, so storage (and a load elsewhere) has it.
   */
  async recordChanged(): Promise<void> {
    this.#state.storage.sql.exec("UPDATE sync SET latest_stale = 1");
    await this.changed();
  }

  async #enterBacklog(p: Persistence): Promise<void> {
    try {
      await this.#backlog.enter(this.#name(), p.queue, p.queue, true);
      this.#state.storage.sql.exec("UPDATE sync SET queued = 1");
    } catch (e) {
      log("warn", "sync backlog unreachable", { session_id: this.#state.row()?.id, error: String(e) });
    }
  }

  /** The object's alarm: an upload round when one is due, then the next alarm. */
  async alarm(): Promise<void> {
    const s = this.#row();
    if (!s || !this.#state.row()) return;
    const c = await this.#ctx();
    if (!c) return;
    if (s.dirty_at === null) return this.#leaveIfQueued(s);
    const due = s.retry_at ?? s.dirty_at + c.p.interval_seconds * 1000;
    if (Date.now() < due) return this.#arm(due);
    if (!s.queued) await this.#enterBacklog(c.p);
    await this.#round(c);
  }

  /** SyncBacklog's startup scan: a queued session re-arms its alarm, or leaves when clean. */
  async kick(): Promise<void> {
    await this.changed(); // anything not in the configured storage (moved since) is dirty first
    const s = this.#row();
    if (!s) return;
    if (s.dirty_at === null) return this.#leaveIfQueued(s);
    // After a restart the upload resumes now, not an interval later; a backoff in force stays.
    const at = s.retry_at ?? Date.now();
    this.#state.storage.sql.exec("UPDATE sync SET retry_at = ?", at);
    await this.#arm(at);
  }

  async #leaveIfQueued(s: SyncRow): Promise<void> {
    if (!s.queued) return;
    try {
      await this.#backlog.leave(this.#name());
      this.#state.storage.sql.exec("UPDATE sync SET queued = 0");
    } catch (e) {
      log("warn", "sync backlog unreachable", { session_id: this.#state.row()?.id, error: String(e) });
    }
  }

  /** One round under the lock; records success or failure and arms the next alarm. */
  #round(c: Ctx): Promise<string | undefined> {
    const run = this.#running.then(async () => {
      const t0 = Date.now();
      const sql = this.#state.storage.sql;
      try {
        const done = await c.up.round();
        this.#recordRound(Date.now() - t0, false);
        if (done) {
          sql.exec("UPDATE sync SET dirty_at = NULL, failures = 0, retry_at = NULL, error = NULL");
          await this.#leaveIfQueued(this.#row()!);
        } else {
          // More to do: straight on when the round stopped at its block budget, else next interval.
          const next = c.up.row().uploaded_offset < this.#state.require().log_bytes ? t0 : t0 + c.p.interval_seconds * 1000;
          sql.exec("UPDATE sync SET failures = 0, retry_at = ?, error = NULL", next);
          await this.#arm(next);
        }
        log("info", "sync round", { session_id: this.#state.row()?.id, provider: c.store.kind, done, ms: Date.now() - t0 });
        return undefined;
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        const failures = (this.#row()?.failures ?? 0) + 1;
        const wait = Math.min(c.p.interval_seconds * 1000 * 2 ** (failures - 1), MAX_BACKOFF_MS);
        sql.exec("UPDATE sync SET failures = ?, retry_at = ?, error = ?", failures, Date.now() + wait, message);
        await this.#arm(Date.now() + wait);
        log("warn", "sync round failed", { session_id: this.#state.row()?.id, provider: c.store.kind, failures, error: message });
        this.#recordRound(Date.now() - t0, true);
        return message;
      }
    });
    // Only the next round waits on this one; its caller gets the outcome (and any error) from `run`.
    this.#running = run.catch(() => undefined);
    return run;
  }

  /** Flush: uploads what is local now, waiting at most FLUSH_WAIT_MS; then the sync status. */
  async flush(): Promise<SyncStatus> {
    const c = await this.#require();
    await this.changed();
    const deadline = Date.now() + FLUSH_WAIT_MS;
    let error: string | undefined;
    while (this.#row()!.dirty_at !== null && Date.now() < deadline) {
      let timer: number | null = null;
      const late = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), deadline - Date.now())));
      const r = await Promise.race([this.#round(c), late]);
      clearTimeout(timer);
      if (r === "timeout") {
        error = `the upload did not finish within ${FLUSH_WAIT_MS / 1000} s`;
        break;
      }
      if (r !== undefined) {
        error = r;
        break;
      }
    }
    const status = this.status();
    if (status.pending && error) status.error = error;
    return status;
  }

  async #require(): Promise<Ctx> {
    const c = await this.#ctx();
    if (!c) throw unsupported("flush, sync and restore need persistence in the host configuration");
    return c;
  }

  /** Read after `changed()` (flush, the sync read): `dirty_at` then says whether storage lacks anything. */
  status(): SyncStatus {
    const r = this.#state.require();
    const s = this.#row();
    const pub = s?.published ? (JSON.parse(s.published) as Published) : undefined;
    const out: SyncStatus = { history_bytes: r.log_bytes, resume_offset: pub?.offset ?? 0, pending: !s || s.dirty_at !== null };
    if (pub) Object.assign(out, { checkpoint: pub.checkpoint, native_checkpoint: pub.native, time: pub.time });
    if (s?.error && out.pending) out.error = s.error;
    return out;
  }

  /**
   * Restore (docs/api.md "Flush, sync, restore"): only a settled session; the checkpoint must
   * be in storage. `release` drops the runner link in the same transaction as the replacement.
   */
  async restore(checkpoint: string, release: () => void): Promise<void> {
    const c = await this.#require();
    settled(this.#state);
    // One at a time: a second one would apply a manifest read before the first cut storage.
    if (this.#restoring) throw conflict("another restore of this session is in progress");
    this.#restoring = true;
    try {
      await this.#restore(c, checkpoint, release);
    } finally {
      this.#restoring = false;
    }
  }

  async #restore(c: Ctx, checkpoint: string, release: () => void): Promise<void> {
    const version = this.#state.require().version;
    const key = c.layout.checkpoint(checkpoint);
    const doomed = this.#state.storage.sql.exec("SELECT 1 FROM sync_orphans WHERE key = ?", key).toArray().length > 0;
    const bytes = doomed ? null : await c.store.get(key);
    if (!bytes) throw notFound(`checkpoint ${checkpoint} is not in storage`);
    const m = parseManifest(bytes);
    const r = this.#state.require();
    checkManifestFor(m, { id: r.id, tenant: r.tenant }, checkpoint);
    checkManifestAgainstLocal(this.#state, m);
    const d = await download(c.store, m, c.layout);
    // Only another deployment could have closed it; close is permanent there too.
    if (endsClosed(d)) throw conflict(`checkpoint ${checkpoint} is the close of the session`);
    // The restore is a change to upload, like a message: a full queue refuses it (429).
    const entered = await this.admit(sessionObjectName(r.tenant, r.id));
    // No upload round may interleave with the replacement.
    const run = this.#running.then(() => {
      settled(this.#state);
      // A message accepted (and maybe run) during the download is not cut by a restore that was
      // asked for before it was: the restore is refused instead, and can be asked for again.
      if (this.#state.require().version !== version) throw conflict("the session changed while it was being restored; restore again");
      this.#state.storage.transactionSync(() => {
        apply(this.#state, c.layout, m, d, "restore", new Date().toISOString(), storageIdentity(c.p));
        release();
      });
    });
    // As above: the ordering chain ignores the outcome; `await run` below throws it to the caller.
    this.#running = run.catch(() => undefined);
    try {
      await run;
    } catch (e) {
      if (entered) await this.settle();
      throw e;
    }
    await this.changed();
    // Repoints latest.json at once (then the cut-off objects go); a failure is retried as usual.
    await this.#round(c);
  }

  /** Load (docs/api.md "Flush, sync, restore"): the session from its `latest.json`; false when storage lacks it. */
  async load(tenant: string, id: string): Promise<boolean> {
    const rt = await getRuntime(this.#env);
    const p = rt.config.persistence;
    if (!p) return false;
    const store = openStore(this.#env, p, rt.vars);
    const layout = await Layout.of(p.prefix, tenant, id);
    const bytes = await store.get(layout.latest());
    if (!bytes) return false;
    const m = parseManifest(bytes);
    checkManifestFor(m, { id, tenant });
    const d = await download(store, m, layout);
    const cutOff = await strays(store, layout, m, id);
    if (this.#state.row()) return true;
    apply(this.#state, layout, m, d, "load", new Date().toISOString(), storageIdentity(p), cutOff);
    await this.changed();
    return true;
  }
}

function settled(s: SessionState): void {
  const r = s.require();
  if (r.status === "closed") throw conflict("session is closed");
  const work = s.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM inputs").one().n;
  if (r.status === "running" || work > 0) throw conflict("session has work in progress; restore needs a settled session");
}
