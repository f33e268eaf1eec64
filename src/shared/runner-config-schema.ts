/**
 * The runner configuration: what `svc runner` needs and nothing more. A runner-host runs harness
 * processes and host tool calls; tenant tokens, provider keys, credential keys and persistence stay
 * with the Worker (provider keys reach a runner-host over its authenticated link, per session).
 * So a runner's file and environment hold only the runner secret and the tools' own tokens.
 *
 * `svc runner` also accepts a full host configuration (a file with `tokens`) and takes these
 * fields from it; `svc runner-config -config <host file>` prints the runner file derived from one.
 */
import * as z from "zod";
import { envName, httpUrl, nonEmpty, plainError } from "./config-fields.ts";
import { unkeptValues } from "./json-values.ts";
import { issueLines } from "./zod-issues.ts";
import {
  DEFAULT_REGION,
  HarnessesSchema,
  LimitsSchema,
  regionName,
  type HostConfig,
} from "./config-schema.ts";
import { ToolsSchema } from "./config-tools.ts";

export const RunnerConfigSchema = z.strictObject({
  /** The service's public base URL: the runner-host dials `<public_url>/internal/runners/...`. */
  public_url: httpUrl({ credentials: false, query: false, fragment: false }).default("http://127.0.0.1:8080"),
  data_dir: nonEmpty.default(".svc"),
  /** One of the service's `runners.regions` (or "default" when it configures none). */
  region: regionName.default(DEFAULT_REGION),
  runners: z.strictObject({ token_env: envName }),
  harnesses: HarnessesSchema,
  tools: ToolsSchema,
  limits: LimitsSchema.prefault({}),
});

export type RunnerConfig = z.output<typeof RunnerConfigSchema>;
export type RunnerConfigResult = { ok: true; config: RunnerConfig; from: "runner" | "host" } | { ok: false; problems: string[] };

/** The fields of a host configuration a runner-host uses. */
export function runnerConfigFromHost(c: HostConfig, region: string = DEFAULT_REGION): RunnerConfig {
  if (!c.runners) throw new Error("the host configuration has no runners section");
  return {
    public_url: c.public_url,
    data_dir: c.data_dir,
    region,
    runners: { token_env: c.runners.token_env },
    harnesses: c.harnesses,
    tools: c.tools,
    limits: c.limits,
  };
}

export function parseRunnerConfig(value: unknown): RunnerConfigResult {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, problems: ["the configuration must be a JSON object"] };
  }
  const unkept = unkeptValues(value);
  if (unkept.length > 0) return { ok: false, problems: unkept };
  const r = RunnerConfigSchema.safeParse(value, { error: plainError });
  return r.success ? { ok: true, config: r.data, from: "runner" } : { ok: false, problems: issueLines(r.error.issues) };
}

