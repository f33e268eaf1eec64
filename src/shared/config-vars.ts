import type { HostConfig } from "./config-schema.ts";

/** `s3` without configured keys: the AWS default chain as far as it exists in a Worker. */
export const S3_CHAIN_VARS = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"] as const;
/** `gcs`: the service-account JSON key, and an emulator's address (tests, local development). */
export const GCS_VARS = ["GCS_SERVICE_ACCOUNT", "STORAGE_EMULATOR_HOST"] as const;

/**
 * Every environment variable the host config names. The local stack binds exactly these into the
 * Worker (never the whole host environment).
 */
export function referencedVariables(c: HostConfig): string[] {
  const names = new Set<string>();
  for (const t of c.tokens) names.add(t.token_env);
  for (const p of Object.values(c.providers)) names.add(p.api_key_env);
  for (const t of c.tools) if (t.token_env) names.add(t.token_env);
  if (c.credential_keys) for (const v of Object.values(c.credential_keys.keys)) names.add(v);
  if (c.runners) names.add(c.runners.token_env);
  const p = c.persistence;
  if (p) for (const v of [p.access_key_env, p.secret_key_env, p.postgres_env]) if (v) names.add(v);
  // Implied by the provider (docs/configuration.md "Persistence"): the default credential chain of
  // `s3` without keys, and the service-account key (and emulator address) of `gcs`.
  if (p?.provider === "s3" && !p.access_key_env) for (const v of S3_CHAIN_VARS) names.add(v);
  if (p?.provider === "gcs") for (const v of GCS_VARS) names.add(v);
  return [...names];
}

/**
 * The host config as a deployed Worker reads the environment. Tool bearer tokens (`tools[].
 * token_env`) are read by the runner-hosts, which make the tool calls, so the Worker needs no
 * secret for them and does not report them missing.
 */
export function workerView(c: HostConfig): HostConfig {
  return { ...c, tools: c.tools.map((t) => ({ ...t, token_env: "" })) };
}
