/**
 * TenantObject: one per tenant, the ordered index behind `GET /sessions`.
 *
 * Storage layout: `sessions(id, version, body)`; body is the Session JSON the SessionObject pushed
 * at `version`. Pushes may arrive late or twice (retried by the session's alarm), so an upsert only
 * replaces an older version. Listing is a keyset scan on the primary key: ascending ids.
 *
 * The index is also how the Worker knows a session exists before it addresses the session's object
 * (addressing an object creates its storage): an id is reserved (version 0, empty body, not listed)
 * before its object is created or loaded from external storage.
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import type { Session } from "../shared/api-schema.ts";
import { migrate } from "../storage/migrate.ts";
import m0001 from "../../migrations/tenant/0001_init.sql";

const MIGRATIONS = [m0001];

export class TenantObject extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage, MIGRATIONS);
  }

  upsert(id: string, version: number, session: Session): void {
    this.ctx.storage.sql.exec(
      `INSERT INTO sessions (id, version, body) VALUES (?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET version = excluded.version, body = excluded.body
       WHERE excluded.version > sessions.version`,
      id,
      version,
      JSON.stringify(session),
    );
  }

  /** Records that session `id` exists (or is being created) before its object is addressed. */
  reserve(id: string): void {
    this.ctx.storage.sql.exec("INSERT OR IGNORE INTO sessions (id, version, body) VALUES (?, 0, '')", id);
  }

  has(id: string): boolean {
    return this.ctx.storage.sql.exec("SELECT 1 FROM sessions WHERE id = ?", id).toArray().length > 0;
  }

  /** Sessions with id greater than `after`, ascending; `only` restricts to one id (session tokens). */
  list(after: string, limit: number, only?: string): Session[] {
    const rows = only
      ? this.ctx.storage.sql.exec<{ body: string }>(
          "SELECT body FROM sessions WHERE id > ? AND id = ? AND version > 0 ORDER BY id LIMIT ?",
          after,
          only,
          limit,
        )
      : this.ctx.storage.sql.exec<{ body: string }>(
          "SELECT body FROM sessions WHERE id > ? AND version > 0 ORDER BY id LIMIT ?",
          after,
          limit,
        );
    return rows.toArray().map((r) => JSON.parse(r.body) as Session);
  }
}
