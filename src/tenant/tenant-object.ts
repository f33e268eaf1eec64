/**
 * TenantObject: one per tenant, the ordered index behind `GET /sessions`.
 *
 * Storage layout: `sessions(id, version, body)`; body is the Session JSON the SessionObject pushed
 * at `version`. Pushes may arrive late or twice (retried by the session's alarm), so an upsert only
 * replaces an older version. Listing is a keyset scan on the primary key: ascending ids.
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

  /** Sessions with id greater than `after`, ascending; `only` restricts to one id (session tokens). */
  list(after: string, limit: number, only?: string): Session[] {
    const rows = only
      ? this.ctx.storage.sql.exec<{ body: string }>(
          "SELECT body FROM sessions WHERE id > ? AND id = ? ORDER BY id LIMIT ?",
          after,
          only,
          limit,
        )
      : this.ctx.storage.sql.exec<{ body: string }>(
          "SELECT body FROM sessions WHERE id > ? ORDER BY id LIMIT ?",
          after,
          limit,
        );
    return rows.toArray().map((r) => JSON.parse(r.body) as Session);
  }
}
