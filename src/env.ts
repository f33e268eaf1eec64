/**
 * Worker bindings. The bindings of wrangler.toml come from `worker-configuration.d.ts`, which
 * `npx wrangler types --include-runtime=false` generates (test/unit/wrangler-config.test.ts fails
 * when it is stale). Besides those, every environment variable the host config names (`token_env`,
 * `api_key_env`, `credential_keys.keys.*`, `runners.token_env`, ...) is a binding of the same name:
 * a Worker secret in production, a Miniflare binding in the local stack.
 */
export type Env = Omit<Cloudflare.Env, "PERSISTENCE"> & {
  /**
   * The host configuration file's text (JSON) when it is not built into the bundle: the local
   * stack and tests bind it; a deployed Worker reads the bundled copy (src/bundled-config.ts).
   */
  HOST_CONFIG?: string;
  /**
   * Persistence `r2`: the bucket wrangler.toml binds. Optional: the local stack binds it only for
   * `r2`, and without it `r2` goes through the S3 API (src/persistence/open-store.ts).
   */
  PERSISTENCE?: R2Bucket;
  /** Persistence `filesystem`: the local stack's file service (runner-host/cli/persistence-fs.ts). */
  PERSISTENCE_FS?: Fetcher;
  /** The local stack's disks: whether they have room for new work (runner-host/cli/disk-room.ts). */
  LOCAL_DISK?: Fetcher;
} & Record<string, unknown>;

/** Secrets and other variables named by the host config, as a plain string map. */
export function envVars(env: Env): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(env)) if (typeof v === "string") out[k] = v;
  return out;
}
