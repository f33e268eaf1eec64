/**
 * The per-isolate view of the host configuration: parsed and checked once, then shared by every
 * request the isolate serves (the Worker and each object run this in their own isolates).
 *
 * Token grants are keyed by the SHA-256 digest of the secret, so a lookup never compares secrets
 * byte by byte and the secrets themselves are not kept past startup.
 */
import { parseHostConfigText, type HostConfig, type HostTool } from "./shared/config-schema.ts";
import { sha256Hex } from "./shared/ids.ts";
import { envVars, type Env } from "./env.ts";
import { DEFAULT_RUNNER_SECRET_VAR } from "./runtime-constants.ts";

export type Grant = {
  tenant: string;
  /** Set for session-scoped tokens: the only session the token reaches (lowercase hex). */
  session?: string;
  /** Set for inspection tokens: the tool call whose duration bounds the token. */
  inspectCall?: string;
  manage: boolean;
  readOnly: boolean;
};

export type Runtime = {
  config: HostConfig;
  grants: Map<string, Grant>;
  /** Digest of the runner-host secret; runner sockets authenticate against it. */
  runnerDigest: string | undefined;
  /** The runner-host secret itself: inspection tokens are signed with a key derived from it. */
  runnerSecret: string | undefined;
  toolsByName: Map<string, HostTool>;
  vars: Record<string, string | undefined>;
};

/** Spec "Authentication": a token secret has at least 24 bytes. */
const MIN_SECRET_BYTES = 24;

let cache: { text: string; runtime: Promise<Runtime> } | undefined;

export function getRuntime(env: Env): Promise<Runtime> {
  if (!cache || cache.text !== env.HOST_CONFIG) cache = { text: env.HOST_CONFIG, runtime: build(env) };
  return cache.runtime;
}

async function build(env: Env): Promise<Runtime> {
  if (typeof env.HOST_CONFIG !== "string") throw new Error("HOST_CONFIG binding is missing");
  const parsed = parseHostConfigText(env.HOST_CONFIG);
  if (!parsed.ok) throw new Error(`host configuration is invalid: ${parsed.problems.join("; ")}`);
  const config = parsed.config;
  // The environment was checked when the stack started (`svc`, or `-check` before a deploy). Here a
  // variable that went missing later only disables what needs it: a token whose secret is absent
  // grants nothing, and creating a session on a provider whose key is empty is `400`.
  const vars = envVars(env);

  const grants = new Map<string, Grant>();
  for (const t of config.tokens) {
    const secret = vars[t.token_env];
    if (!secret || new TextEncoder().encode(secret).length < MIN_SECRET_BYTES) continue;
    grants.set(await sha256Hex(secret), {
      tenant: t.tenant,
      session: t.session ? t.session.toLowerCase() : undefined,
      manage: t.manage,
      readOnly: t.read_only,
    });
  }
  const runnerSecret = vars[config.runners?.token_env ?? DEFAULT_RUNNER_SECRET_VAR];
  return {
    config,
    grants,
    runnerDigest: runnerSecret ? await sha256Hex(runnerSecret) : undefined,
    runnerSecret,
    toolsByName: new Map(config.tools.map((t) => [t.name, t])),
    vars,
  };
}
