/**
 * Checks the environment variables a parsed host configuration names (docs/configuration.md
 * "Fields" and "Environment"). Runs at Worker startup and in `svc -check`, so it uses only
 * web-standard APIs. Problems name the field and the variable, never the value.
 */
import { formatPath } from "./zod-issues.ts";
import type { HostConfig } from "./config-schema.ts";
import { DEFAULT_RUNNER_SECRET_VAR } from "../runtime-constants.ts";
import { fromBase64 } from "./base64.ts";
import { isInspectionToken } from "./inspection-token.ts";
import { serviceAccountProblem } from "../persistence/gcs-store.ts";

/** A token secret is at least 24 bytes (docs/configuration.md "Tokens"). */
export const MIN_SECRET_BYTES = 24;
/** `credential_keys`: a base64 32-byte (AES-256) key (docs/configuration.md "Credential keys"). */
export const CREDENTIAL_KEY_BYTES = 32;

type Env = Record<string, string | undefined>;

const encoder = new TextEncoder();

/**
 * What a secret sent as `Authorization: Bearer <secret>` cannot hold: the header's token ends at
 * whitespace (src/http/auth.ts), and HTTP carries no control characters. Such a secret would pass
 * every check and never authenticate.
 */
const NOT_IN_BEARER = /[\s\x00-\x1f\x7f]/;

/** What is wrong with the secret in variable `name` (unset, under MIN_SECRET_BYTES, not sendable), or null. */
export function secretProblem(field: string, name: string, env: Env): string | null {
  const value = env[name];
  if (value === undefined) return `${field}: environment variable ${name} is not set`;
  if (encoder.encode(value).length < MIN_SECRET_BYTES) return `${field}: environment variable ${name} must hold at least ${MIN_SECRET_BYTES} bytes`;
  if (NOT_IN_BEARER.test(value)) return `${field}: environment variable ${name} holds whitespace or a control character, which a bearer token cannot carry`;
  return null;
}

/** What is wrong with variable `name` that must hold something (unset, or empty), or null. */
export function nonEmptyProblem(field: string, name: string, env: Env): string | null {
  const value = env[name];
  if (value === undefined) return `${field}: environment variable ${name} is not set`;
  if (value === "") return `${field}: environment variable ${name} is empty`;
  return null;
}

export function checkEnvironment(config: HostConfig, env: Env): string[] {
  const problems: string[] = [];
  const secret = (field: string, name: string): string | undefined => {
    const problem = secretProblem(field, name, env);
    if (problem) problems.push(problem);
    return problem ? undefined : env[name];
  };
  const nonEmpty = (field: string, name: string) => {
    const problem = nonEmptyProblem(field, name, env);
    if (problem) problems.push(problem);
  };

  // Two grants with one secret would make the second unreachable (or hand out the wrong tenant).
  const owners = new Map<string, string>();
  config.tokens.forEach((t, i) => {
    const field = `tokens[${i}].token_env`;
    const value = secret(field, t.token_env);
    if (value === undefined) return;
    if (isInspectionToken(value)) {
      problems.push(`${field}: environment variable ${t.token_env} starts with "svci.", which marks an inspection token`);
      return;
    }
    const first = owners.get(value);
    if (first) problems.push(`${field}: environment variable ${t.token_env} holds the same secret as ${first}`);
    else owners.set(value, `${field} (${t.token_env})`);
  });

  for (const [prefix, p] of Object.entries(config.providers)) nonEmpty(formatPath(["providers", prefix, "api_key_env"]), p.api_key_env);
  config.tools.forEach((t, i) => {
    if (t.token_env !== "") nonEmpty(`tools[${i}].token_env`, t.token_env);
  });

  const store = config.persistence;
  if (store) {
    if (store.postgres_env !== "") nonEmpty("persistence.postgres_env", store.postgres_env);
    if (store.access_key_env !== undefined) nonEmpty("persistence.access_key_env", store.access_key_env);
    if (store.secret_key_env !== undefined) nonEmpty("persistence.secret_key_env", store.secret_key_env);
    if (store.provider === "s3" && store.access_key_env === undefined) {
      // The default chain as far as it exists in a Worker: keys in the environment.
      nonEmpty("persistence (s3 default credential chain)", "AWS_ACCESS_KEY_ID");
      nonEmpty("persistence (s3 default credential chain)", "AWS_SECRET_ACCESS_KEY");
    }
    if (store.provider === "gcs" && !env.STORAGE_EMULATOR_HOST) {
      const problem = serviceAccountProblem(env.GCS_SERVICE_ACCOUNT);
      if (problem) problems.push(`persistence (gcs): environment variable GCS_SERVICE_ACCOUNT ${problem}`);
    }
  }

  for (const [id, name] of Object.entries(config.credential_keys?.keys ?? {})) {
    const problem = aesKeyProblem(env[name]);
    if (problem) problems.push(`${formatPath(["credential_keys", "keys", id])}: environment variable ${name} ${problem}`);
  }

  // Without `runners`, a deployment's runner-hosts use the default variable when it is set (the
  // local stack generates its own secret instead): it is held to the same rules.
  const runnerVar = config.runners?.token_env ?? (env[DEFAULT_RUNNER_SECRET_VAR] !== undefined ? DEFAULT_RUNNER_SECRET_VAR : undefined);
  if (runnerVar !== undefined) {
    const field = config.runners ? "runners.token_env" : "runners";
    const value = secret(field, runnerVar);
    // A client token that also opened runner sockets would let a tenant impersonate a runner-host.
    const clash = value === undefined ? undefined : owners.get(value);
    if (clash) problems.push(`${field}: environment variable ${runnerVar} holds the same secret as ${clash}`);
  }
  return problems;
}

/** The runner secret the Worker may trust: set, long enough, and no client token's secret. */
export function usableRunnerSecret(config: HostConfig, env: Env): string | undefined {
  const value = env[config.runners?.token_env ?? DEFAULT_RUNNER_SECRET_VAR];
  if (value === undefined || encoder.encode(value).length < MIN_SECRET_BYTES) return undefined;
  if (config.tokens.some((t) => env[t.token_env] === value)) return undefined;
  return value;
}

/** Why a variable is not a usable AES-256 key, or undefined when it is one. */
export function aesKeyProblem(value: string | undefined): string | undefined {
  if (value === undefined) return "is not set";
  if (value === "") return "is empty";
  let decoded: Uint8Array;
  try {
    // The same decoder the Worker imports the key with, so what passes here also imports there.
    decoded = fromBase64(value);
  } catch {
    return "is not valid base64";
  }
  if (decoded.length !== CREDENTIAL_KEY_BYTES) {
    return `must hold base64 of exactly ${CREDENTIAL_KEY_BYTES} bytes (it decodes to ${decoded.length})`;
  }
  return undefined;
}
