/**
 * The per-isolate view of the host configuration: parsed and checked once, then shared by every
 * request the isolate serves (the Worker and each object run this in their own isolates). The text
 * is the one built into the bundle (`svc deploy`), else the `HOST_CONFIG` binding.
 *
 * Token grants are keyed by the SHA-256 digest of the secret, so a lookup never compares secrets
 * byte by byte and the secrets themselves are not kept past startup.
 */
import { parseHostConfigText, type HostConfig, type HostTool } from "./shared/config-schema.ts";
import { sha256Hex } from "./shared/ids.ts";
import { bundledConfig } from "./bundled-config.ts";
import { workerView } from "./shared/config-vars.ts";
import { envVars, type Env } from "./env.ts";
import { checkEnvironment, MIN_SECRET_BYTES, usableRunnerSecret } from "./shared/config-env.ts";
import { log } from "./log.ts";
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
  /**
   * What the environment lacks, one line per variable, naming the field and the variable (never a
   * value): `GET /internal/status` reports it and the isolate logs it once.
   */
  envProblems: string[];
  /** Where the text came from. */
  source: "bundle" | "binding";
};

let cache: { text: string; runtime: Promise<Runtime> } | undefined;

export function getRuntime(env: Env): Promise<Runtime> {
  const text = bundledConfig()?.text ?? env.HOST_CONFIG;
  if (typeof text !== "string") return Promise.reject(new Error("no host configuration: deploy with `svc deploy`, or bind HOST_CONFIG"));
  if (!cache || cache.text !== text) cache = { text, runtime: build(env, text) };
  return cache.runtime;
}

async function build(env: Env, text: string): Promise<Runtime> {
  const bundled = bundledConfig();
  const digests = bundled?.tokenDigests ?? {};
  const parsed = parseHostConfigText(text);
  if (!parsed.ok) throw new Error(`host configuration is invalid: ${parsed.problems.join("; ")}`);
  const config = parsed.config;
  // The environment was checked when the stack started (`svc`, or `-check` before a deploy). Here a
  // variable that went missing later only disables what needs it: a token whose secret is absent
  // grants nothing, and creating a session on a provider whose key is empty is `400`.
  const vars = envVars(env);

  const grants = new Map<string, Grant>();
  for (const t of config.tokens) {
    // A bundled digest wins over a secret of the same name: it is what the last deploy checked.
    const secret = vars[t.token_env];
    const digest = digests[t.token_env] ?? (secret && new TextEncoder().encode(secret).length >= MIN_SECRET_BYTES ? await sha256Hex(secret) : undefined);
    if (!digest) continue;
    grants.set(digest, {
      tenant: t.tenant,
      session: t.session ? t.session.toLowerCase() : undefined,
      manage: t.manage,
      readOnly: t.read_only,
    });
  }
  // Tokens deployed as digests were checked by the deploy; every other variable the Worker reads
  // is checked here against its own bindings, with the same rules as `svc -check`.
  const view = workerView(config);
  const envProblems = checkEnvironment({ ...view, tokens: view.tokens.filter((t) => !Object.hasOwn(digests, t.token_env)) }, vars);
  if (envProblems.length > 0) log("warn", "the host configuration names variables the Worker lacks", { problems: envProblems.join("; ") });
  // A runner secret under 24 bytes, or one a client token also holds, opens nothing: a tenant
  // must never be able to dial in as a runner-host or mint inspection tokens.
  const runnerSecret = usableRunnerSecret(config, vars);
  const runnerVar = config.runners?.token_env ?? DEFAULT_RUNNER_SECRET_VAR;
  if (runnerSecret === undefined && vars[runnerVar] !== undefined) {
    log("error", "the runner secret is under 24 bytes or equals a client token: runner-hosts cannot connect", { variable: runnerVar });
  }
  return {
    config,
    grants,
    runnerDigest: runnerSecret ? await sha256Hex(runnerSecret) : undefined,
    runnerSecret,
    toolsByName: new Map(config.tools.map((t) => [t.name, t])),
    vars,
    envProblems,
    source: bundled ? "bundle" : "binding",
  };
}
