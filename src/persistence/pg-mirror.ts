/**
 * The PostgreSQL mirror of the session index (`persistence.postgres_env`): every deployment that
 * shares the database and the storage bucket can discover a tenant's sessions, also ones created
 * elsewhere; `GET /sessions/{id}` then loads such a session from storage.
 *
 * Reached through a Hyperdrive binding named POSTGRES when the deployment has one (pooled
 * connections near the database), otherwise directly with the connection string in the variable
 * `postgres_env` names (the local stack). One short-lived client per call: a Worker cannot keep a
 * connection between requests, and Hyperdrive pools behind it.
 *
 * Table (created when missing): svc_sessions(tenant, id, version, body jsonb, updated_at), primary
 * key (tenant, id). Writes only replace an older row — by the session's own `updated_at`, then its
 * version (merge-pages.ts `newer`) — so late or repeated mirrors, and a session's rows from two
 * deployments, are harmless. Every call is bounded (MIRROR_CALL_MS): a database that accepts
 * connections and never answers fails the call, so a list falls back to the local index and a
 * mirror write is retried, instead of both waiting for good.
 */
import type { Env } from "../env.ts";
import type { Runtime } from "../runtime.ts";
import type { Session } from "../shared/api-schema.ts";
import type { MirrorRow } from "./merge-pages.ts";

export const HYPERDRIVE_BINDING = "POSTGRES";

export type { MirrorRow } from "./merge-pages.ts";
export { mergePages } from "./merge-pages.ts";

const DDL = `CREATE TABLE IF NOT EXISTS svc_sessions (
  tenant TEXT NOT NULL,
  id TEXT NOT NULL,
  version BIGINT NOT NULL,
  body JSONB NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, id)
)`;

let tableReady = false;

/** Longest one mirror call may take, connection included, ms: a list waits this long at worst. */
const MIRROR_CALL_MS = 5_000;
/** Longest wait for a connection's orderly close, ms: a stalled one is dropped, not waited on. */
const MIRROR_CLOSE_MS = 100;

/** The connection string, or undefined when no mirror is configured. */
export function mirrorConnection(env: Env, rt: Runtime): string | undefined {
  const p = rt.config.persistence;
  if (!p || p.postgres_env === "") return undefined;
  const hyperdrive = env[HYPERDRIVE_BINDING] as { connectionString?: string } | undefined;
  return hyperdrive?.connectionString ?? rt.vars[p.postgres_env];
}

async function withClient<T>(conn: string, fn: (q: (text: string, values?: unknown[]) => Promise<{ rows: any[] }>) => Promise<T>): Promise<T> {
  // Loaded only where a mirror is configured: most deployments never evaluate the driver.
  const { default: pg } = await import("pg");
  const client = new pg.Client({ connectionString: conn });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the session mirror did not answer within ${MIRROR_CALL_MS / 1000} s`)), MIRROR_CALL_MS);
  });
  const work = (async () => {
    await client.connect();
    const q = (text: string, values?: unknown[]) => client.query(text, values);
    if (!tableReady) {
      await q(DDL);
      tableReady = true;
    }
    return await fn(q);
  })();
  work.catch(() => undefined); // after a timeout its own failure has no one to tell
  try {
    return await Promise.race([work, late]);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    // The query's own outcome is what the caller needs; a stalled connection is cut here.
    await Promise.race([client.end(), new Promise((r) => setTimeout(r, MIRROR_CLOSE_MS))]).catch(() => undefined);
  }
}

export function mirrorUpsert(conn: string, tenant: string, rows: MirrorRow[]): Promise<void> {
  return withClient(conn, async (q) => {
    for (const r of rows) {
      await q(
        `INSERT INTO svc_sessions (tenant, id, version, body) VALUES ($1, $2, $3, $4)
         ON CONFLICT (tenant, id) DO UPDATE SET version = excluded.version, body = excluded.body, updated_at = now()
         WHERE (svc_sessions.body->>'updated_at', svc_sessions.version) < (excluded.body->>'updated_at', excluded.version)`,
        [tenant, r.id, r.version, JSON.stringify(r.body)],
      );
    }
  });
}

/** A keyset page of the tenant's sessions as mirrored (ids above `after`, ascending). */
export function mirrorList(conn: string, tenant: string, after: string, limit: number, only?: string): Promise<MirrorRow[]> {
  return withClient(conn, async (q) => {
    const { rows } = only
      ? await q("SELECT id, version, body FROM svc_sessions WHERE tenant = $1 AND id > $2 AND id = $3 ORDER BY id LIMIT $4", [tenant, after, only, limit])
      : await q("SELECT id, version, body FROM svc_sessions WHERE tenant = $1 AND id > $2 ORDER BY id LIMIT $3", [tenant, after, limit]);
    return rows.map((r) => ({ id: r.id as string, version: Number(r.version), body: r.body as Session }));
  });
}
