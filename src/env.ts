import type { SyncBacklog } from "./persistence/backlog-object.ts";
import type { RunnerPool } from "./runner/runner-pool.ts";
import type { SessionObject } from "./session/session-object.ts";
import type { TenantObject } from "./tenant/tenant-object.ts";

/**
 * Worker bindings. Besides these, every environment variable the host config names
 * (`token_env`, `api_key_env`, `credential_keys.keys.*`, `runners.token_env`, ...) is a binding of
 * the same name: a Worker secret in production, a Miniflare binding in the local stack.
 */
export type Env = {
  /** The host configuration file's text (JSON). */
  HOST_CONFIG: string;
  SESSIONS: DurableObjectNamespace<SessionObject>;
  TENANTS: DurableObjectNamespace<TenantObject>;
  RUNNERS: DurableObjectNamespace<RunnerPool>;
  SYNC_BACKLOG: DurableObjectNamespace<SyncBacklog>;
  /** Persistence `r2`: the bound bucket, when the deployment binds one (wrangler.toml). */
  PERSISTENCE?: R2Bucket;
  /** Persistence `filesystem`: the local stack's file service. */
  PERSISTENCE_FS?: Fetcher;
} & Record<string, unknown>;

/** Secrets and other variables named by the host config, as a plain string map. */
export function envVars(env: Env): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(env)) if (typeof v === "string") out[k] = v;
  return out;
}
