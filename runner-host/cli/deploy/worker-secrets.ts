/**
 * Which variables a deployed Worker needs as secrets, and their values from the deploying
 * machine's environment. Every variable the host configuration names is one Worker secret, except
 * tool bearer tokens (the runner-hosts read those) and tenant tokens deployed as digests
 * (`-token-digests`): their SHA-256 goes into the bundle instead, which is how a deployment with
 * many tenants stays under the platform's cap on secrets and variables per Worker.
 */
import { createHash } from "node:crypto";
import { checkEnvironment } from "../../../src/shared/config-env.ts";
import type { HostConfig } from "../../../src/shared/config-schema.ts";
import { referencedVariables, workerView } from "../../../src/shared/config-vars.ts";

/** Workers cap on secrets plus variables per Worker (Paid plan; the Free plan allows 64). */
export const WORKER_VARIABLES_LIMIT = 128;
export const WORKER_VARIABLES_LIMIT_FREE = 64;

export type SecretsPlan = {
  /** Variables the Worker needs as secrets, sorted. */
  names: string[];
  /** `token_env` → SHA-256 hex of its secret, for tokens bundled as digests. */
  tokenDigests: Record<string, string>;
  /** Problems with the environment, `-check` wording: field and variable names, never a value. */
  problems: string[];
};

export function planSecrets(config: HostConfig, env: Record<string, string | undefined>, o: { tokenDigests: boolean }): SecretsPlan {
  const view = workerView(config);
  const problems = checkEnvironment(view, env);
  const rest: HostConfig = o.tokenDigests ? { ...view, tokens: [] } : view;
  const names = referencedVariables(rest).sort();
  const tokenDigests: Record<string, string> = {};
  if (o.tokenDigests) {
    for (const t of config.tokens) {
      const value = env[t.token_env];
      if (value !== undefined) tokenDigests[t.token_env] = createHash("sha256").update(value, "utf8").digest("hex");
    }
  }
  return { names, tokenDigests, problems };
}

/** `{name: value}` for `wrangler secret bulk` / `wrangler deploy --secrets-file`. */
export function secretValues(names: readonly string[], env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) if (env[n] !== undefined) out[n] = env[n]!;
  return out;
}

/** A line about the count against the platform cap, or a refusal when over it. */
export function variablesBudget(count: number): { ok: boolean; line: string } {
  const line = `${count} Worker secrets (a Worker may have ${WORKER_VARIABLES_LIMIT} secrets and variables on Workers Paid, ${WORKER_VARIABLES_LIMIT_FREE} on Free)`;
  if (count <= WORKER_VARIABLES_LIMIT) return { ok: true, line };
  return { ok: false, line: `${line}: too many; pass -token-digests to bundle tenant tokens as digests instead` };
}
