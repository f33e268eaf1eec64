/**
 * Reads the configuration `svc runner` runs with: a runner configuration, or a full host
 * configuration (a file with `tokens`) from which the runner's fields are taken. Either way only
 * the variables a runner-host reads are checked: the runner secret and the tools' bearer tokens.
 * `SVC_RUNNER_REGION` in the environment overrides the file's `region` (one file, many VMs).
 */
import { insecureSecretTarget } from "../socket.ts";
import { nonEmptyProblem, secretProblem } from "../../src/shared/config-env.ts";
import { parseConfigText, parseHostConfig, regionName } from "../../src/shared/config-schema.ts";
import { parseRunnerConfig, runnerConfigFromHost, type RunnerConfig, type RunnerConfigResult } from "../../src/shared/runner-config-schema.ts";
import { readTextFile } from "./config-file.ts";

/** Environment variable that overrides the configured region. */
export const REGION_VAR = "SVC_RUNNER_REGION";

export type RunnerLoad = { ok: true; config: RunnerConfig; path: string; from: "runner" | "host" } | { ok: false; problems: string[] };

export async function loadRunnerConfigFile(file: string, env: Record<string, string | undefined> = process.env, o: { checkEnv?: boolean } = {}): Promise<RunnerLoad> {
  const read = await readTextFile(file);
  if (!read.ok) return read;
  let regions: string[] = [];
  const parsed = parseConfigText(read.text, (value) => parseEither(value, (r) => (regions = r)));
  if (!parsed.ok) return parsed;
  const config = { ...parsed.config };
  const region = env[REGION_VAR];
  if (region !== undefined) {
    if (!regionName.safeParse(region).success) return { ok: false, problems: [`environment variable ${REGION_VAR}: must be 1 to 32 lowercase letters, digits or dashes`] };
    config.region = region;
  }
  // A host configuration that lists regions does not say which one this runner-host serves; the
  // service would refuse it every time (409), as `svc runner-config` refuses to guess.
  if (regions.length > 0 && !regions.includes(config.region)) {
    const why = region === undefined ? "is not set" : `is "${region}"`;
    return { ok: false, problems: [`runners.regions: the host configuration lists ${regions.join(", ")}; set ${REGION_VAR} to the one this runner-host serves (it ${why})`] };
  }
  const problems = o.checkEnv === false ? [] : checkRunnerEnvironment(config, env);
  // What the run would refuse at start, `-check` refuses too.
  const insecure = insecureSecretTarget(config.public_url);
  if (insecure && o.checkEnv !== false) problems.push(`public_url: ${insecure}`);
  return problems.length > 0 ? { ok: false, problems } : { ok: true, config, path: read.path, from: parsed.from };
}

/** A runner configuration, or the runner's part of a host configuration (its regions to `regionsOf`). */
function parseEither(value: unknown, regionsOf: (regions: string[]) => void): RunnerConfigResult {
  if (typeof value !== "object" || value === null || !Object.hasOwn(value, "tokens")) return parseRunnerConfig(value);
  const host = parseHostConfig(value);
  if (!host.ok) return host;
  if (!host.config.runners) return { ok: false, problems: ["runners: required for svc runner (the secret it dials the service with)"] };
  regionsOf(Object.keys(host.config.runners.regions ?? {}));
  return { ok: true, config: runnerConfigFromHost(host.config), from: "host" };
}

/** The `-check` rules, for the variables a runner-host reads. Names only, never values. */
export function checkRunnerEnvironment(c: RunnerConfig, env: Record<string, string | undefined>): string[] {
  const problems = [secretProblem("runners.token_env", c.runners.token_env, env)];
  c.tools.forEach((t, i) => {
    if (t.token_env !== "") problems.push(nonEmptyProblem(`tools[${i}].token_env`, t.token_env, env));
  });
  return problems.filter((p) => p !== null);
}
