/**
 * `svc secrets -config <path> [-token-digests] [-out <file>]`: the variables a deployed Worker
 * needs as secrets. Without `-out` it prints their names, one per line. With `-out` it writes them
 * with their values from this environment (and the `.env` file beside the config) as JSON, mode
 * 0600, for `npx wrangler secret bulk <file>`; it writes nothing when a variable is missing or
 * unusable, and names each one. Exit codes: 0 ok, 1 a problem, 2 bad usage.
 */
import { writeFileSync } from "node:fs";
import { loadEnvFileChecked, readConfigFile } from "../config-file.ts";
import { parseFlags } from "./flags.ts";
import { planSecrets, secretValues, variablesBudget } from "./worker-secrets.ts";

export const SECRETS_USAGE = `usage: svc secrets -config <path> [-token-digests] [-out <file>]

  Lists the variables the host configuration names that a deployed Worker needs as secrets.

flags:
  -config <path>    host configuration file
  -token-digests    leave tenant tokens out (svc deploy -token-digests bundles their digests)
  -out <file>       write {"NAME": "value", ...} (mode 0600) for \`npx wrangler secret bulk <file>\`
`;

export async function secretsMain(argv: readonly string[]): Promise<number> {
  const parsed = parseFlags(argv, { config: "string", "token-digests": "boolean", out: "string" });
  if (!parsed.ok) return usage(parsed);
  const { config: configArg, out } = parsed.flags as { config?: string; out?: string };
  if (!configArg) return usage({ help: false, problem: "-config <path> is required" });
  const env = loadEnvFileChecked(configArg);
  if (!env.ok) {
    process.stderr.write(`${env.problem}\n`);
    return 1;
  }
  const read = await readConfigFile(configArg);
  if (!read.ok) {
    for (const p of read.problems) process.stderr.write(`${configArg}: ${p}\n`);
    return 1;
  }
  const plan = planSecrets(read.config, process.env, { tokenDigests: parsed.flags["token-digests"] === true });
  const budget = variablesBudget(plan.names.length);
  process.stderr.write(`svc: ${budget.line}\n`);
  if (out === undefined) {
    process.stdout.write(plan.names.map((n) => `${n}\n`).join(""));
    return budget.ok ? 0 : 1;
  }
  // Tokens left out for -token-digests are not written, so only the written variables must be usable.
  const problems = parsed.flags["token-digests"] === true ? plan.problems.filter((p) => !/^tokens\[/.test(p)) : plan.problems;
  if (problems.length > 0 || !budget.ok) {
    for (const p of problems) process.stderr.write(`${configArg}: ${p}\n`);
    process.stderr.write(`svc: nothing written to ${out}\n`);
    return 1;
  }
  writeFileSync(out, `${JSON.stringify(secretValues(plan.names, process.env), null, 2)}\n`, { mode: 0o600 });
  process.stderr.write(`svc: wrote ${plan.names.length} secrets to ${out}; upload with \`npx wrangler secret bulk ${out}\`, then delete the file\n`);
  return 0;
}

function usage(p: { help: boolean; problem?: string }): number {
  if (p.help) {
    process.stdout.write(SECRETS_USAGE);
    return 0;
  }
  process.stderr.write(`svc secrets: ${p.problem}\n${SECRETS_USAGE}`);
  return 2;
}
