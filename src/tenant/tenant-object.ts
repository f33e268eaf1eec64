/**
 * TenantObject: one per tenant, the ordered index behind `GET /sessions`.
 *
 * Storage layout: `sessions(id, version, body)`; body is the Session JSON the SessionObject pushed
 * at `version`. Pushes may arrive late or twice (retried by the session's alarm), so an upsert only
 * replaces an older version. Listing is a keyset scan on the primary key: ascending ids.
 *
 * Lifecycle of a gathered push (`gather`): held in memory for GATHER_MS with the others that arrive
 * meanwhile, then all written in one commit and answered once it is durable. An instance that goes
 * first fails those calls, and their sessions push again (the version is still owed there).
 *
 * The index is also how the Worker knows a session exists before it addresses the session's object
 * (addressing an object creates its storage): an id is reserved (version 0, empty body, not listed)
 * before its object is created or loaded from external storage.
 *
 * With `persistence.postgres_env`, changed rows are mirrored to PostgreSQL (src/persistence/
 * pg-mirror.ts) by an alarm MIRROR_DELAY_MS after the first unmirrored change, in batches, so a
 * busy session costs the database one write per delay rather than one per event; a failed batch
 * is retried with backoff. `mirrored` holds the version last written there.
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import type { Session } from "../shared/api-schema.ts";
import { migrate } from "../storage/migrate.ts";
import m0001 from "../../migrations/tenant/0001_init.sql";
import m0002 from "../../migrations/tenant/0002_mirror.sql";
import { log } from "../log.ts";
import { getRuntime } from "../runtime.ts";
import { mirrorConnection, mirrorUpsert, type MirrorRow } from "../persistence/pg-mirror.ts";
import { byteLength } from "../shared/ids.ts";
import { cutPage } from "./list-page.ts";

const MIGRATIONS = [m0001, m0002];
/** Delay before changed rows are mirrored, ms: batches a burst of changes into one write. */
const MIRROR_DELAY_MS = 1_000;
/** Rows written per mirror batch. */
const MIRROR_BATCH = 100;
/** Longest wait between mirror retries, ms. */
const MIRROR_MAX_BACKOFF_MS = 60_000;
/**
 * How long a gathered push waits for others to share its commit, ms. Every commit syncs the
 * object's log to disk (in the local stack ~0.25 ms of the objects' one thread and ~0.8 ms
 * blocked on this kind of disk; bench/RESULTS.md), and each session pushes at most once a second,
 * spread over the second: 50 busy sessions are ~50 commits a second one by one, ~8 gathered. Only
 * a list waits on these pushes, and it may show a busy session a second behind anyway.
 */
export const GATHER_MS = 100;

type Gathered = { version: number; body: string; tenant: string | undefined };

export class TenantObject extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage, MIGRATIONS);
  }

  #mirrorFailures = 0;
  /** Pushes held for the next gathered commit, by session id (the newest version of each). */
  #gathered = new Map<string, Gathered>();
  /** Settles once the gathered rows are written (undefined while nothing is gathered). */
  #written: Promise<void> | undefined;

  /**
   * Writes a session's summary now (a change its caller answers only once the list shows it).
   * `body`: the Session as JSON text (src/session/record.ts `sessionJson`).
   */
  async upsert(id: string, version: number, body: string, tenant?: string): Promise<void> {
    this.#noteTenant(tenant);
    this.#write(id, version, body);
    await this.#mirrorSoon();
  }

  /**
   * Writes a session's summary with the others gathered within GATHER_MS, in one commit (a push
   * nobody waits on but a list); resolves once that commit is durable.
   */
  gather(id: string, version: number, body: string, tenant?: string): Promise<void> {
    const held = this.#gathered.get(id);
    if (!held || version > held.version) this.#gathered.set(id, { version, body, tenant });
    this.#written ??= new Promise<void>((resolve, reject) => {
      setTimeout(() => {
        const rows = [...this.#gathered];
        this.#gathered.clear();
        this.#written = undefined;
        try {
          this.#noteTenant(rows.find(([, r]) => r.tenant !== undefined)?.[1].tenant); // one tenant per object
          for (const [id, r] of rows) this.#write(id, r.version, r.body);
        } catch (e) {
          return reject(e);
        }
        resolve(this.#mirrorSoon());
      }, GATHER_MS);
    });
    return this.#written;
  }

  /** The tenant's name, for the mirror's rows (pushes carry it; the first one stored stays). */
  #noteTenant(tenant: string | undefined): void {
    if (tenant !== undefined) this.ctx.storage.sql.exec("INSERT OR IGNORE INTO tenant (name) VALUES (?)", tenant);
  }

  #write(id: string, version: number, body: string): void {
    this.ctx.storage.sql.exec(
      `INSERT INTO sessions (id, version, body) VALUES (?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET version = excluded.version, body = excluded.body
       WHERE excluded.version > sessions.version`,
      id,
      version,
      body,
    );
  }

  /** With a PostgreSQL mirror: its alarm, unless one is already set. */
  async #mirrorSoon(): Promise<void> {
    if (mirrorConnection(this.env, await getRuntime(this.env)) && (await this.ctx.storage.getAlarm()) === null) {
      await this.ctx.storage.setAlarm(Date.now() + MIRROR_DELAY_MS);
    }
  }

  /** Writes unmirrored rows to PostgreSQL; re-arms while some remain or after a failure. */
  async alarm(): Promise<void> {
    const rt = await getRuntime(this.env);
    const conn = mirrorConnection(this.env, rt);
    if (!conn) return;
    const tenant = this.ctx.storage.sql.exec<{ name: string }>("SELECT name FROM tenant").toArray()[0]?.name;
    if (tenant === undefined) return;
    const rows = this.ctx.storage.sql
      .exec<{ id: string; version: number; body: string }>("SELECT id, version, body FROM sessions WHERE version > 0 AND mirrored < version ORDER BY id LIMIT ?", MIRROR_BATCH)
      .toArray();
    if (rows.length === 0) return;
    const batch: MirrorRow[] = rows.map((r) => ({ id: r.id, version: r.version, body: JSON.parse(r.body) as Session }));
    try {
      await mirrorUpsert(conn, tenant, batch);
      for (const r of batch) this.ctx.storage.sql.exec("UPDATE sessions SET mirrored = MAX(mirrored, ?) WHERE id = ?", r.version, r.id);
      this.#mirrorFailures = 0;
      log("info", "tenant index mirrored", { sessions: batch.length });
      const more = this.ctx.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM sessions WHERE version > 0 AND mirrored < version").one().n;
      if (more > 0) await this.ctx.storage.setAlarm(Date.now() + MIRROR_DELAY_MS);
    } catch (e) {
      this.#mirrorFailures++;
      const wait = Math.min(MIRROR_DELAY_MS * 2 ** this.#mirrorFailures, MIRROR_MAX_BACKOFF_MS);
      log("warn", "tenant index mirror failed", { failures: this.#mirrorFailures, error: String(e) });
      await this.ctx.storage.setAlarm(Date.now() + wait);
    }
  }

  /** Rows of a list page with their versions, for merging with the mirror's page; `cut` as `list`'s. */
  listRows(after: string, limit: number, only?: string): { rows: MirrorRow[]; cut: boolean } {
    const page = this.#page(after, limit, only);
    return { rows: page.rows.map((r) => ({ id: r.id, version: r.version, body: JSON.parse(r.body) as Session })), cut: page.cut };
  }

  /** Records that session `id` exists (or is being created) before its object is addressed. */
  reserve(id: string): void {
    this.ctx.storage.sql.exec("INSERT OR IGNORE INTO sessions (id, version, body) VALUES (?, 0, '')", id);
  }

  has(id: string): boolean {
    return this.ctx.storage.sql.exec("SELECT 1 FROM sessions WHERE id = ?", id).toArray().length > 0;
  }

  /**
   * Sessions with id greater than `after`, ascending; `only` restricts to one id (session tokens).
   * `cut`: the page stopped before PAGE_BYTES of session JSON (list-page.ts) and more follow.
   */
  list(after: string, limit: number, only?: string): { sessions: Session[]; cut: boolean } {
    const page = this.#page(after, limit, only);
    return { sessions: page.rows.map((r) => JSON.parse(r.body) as Session), cut: page.cut };
  }

  #page(after: string, limit: number, only?: string): { rows: { id: string; version: number; body: string }[]; cut: boolean } {
    // Read a row at a time: the page stops at its size before the rest are loaded.
    const rows = only
      ? this.ctx.storage.sql.exec<{ id: string; version: number; body: string }>(
          "SELECT id, version, body FROM sessions WHERE id > ? AND id = ? AND version > 0 ORDER BY id LIMIT ?",
          after,
          only,
          limit,
        )
      : this.ctx.storage.sql.exec<{ id: string; version: number; body: string }>(
          "SELECT id, version, body FROM sessions WHERE id > ? AND version > 0 ORDER BY id LIMIT ?",
          after,
          limit,
        );
    return cutPage(rows, (r) => byteLength(r.body), limit);
  }
}
