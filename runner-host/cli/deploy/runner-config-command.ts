/**
 * `svc runner-config -config <host file> [-region <name>]`: prints the runner configuration
 * derived from a host configuration (runner secret, harnesses, tools, limits, `public_url`,
 * `data_dir`, region), for the runner-hosts' machines, which then hold no tenant token and no
 * provider key. Exit codes: 0 ok, 1 invalid file, 2 bad usage.
 */
import { regionName } from "../../../src/shared/config-schema.ts";
import { runnerConfigFromHost } from "../../../src/shared/runner-config-schema.ts";
import { readConfigFile } from "../config-file.ts";
import { parseFlags } from "./flags.ts";

export const RUNNER_CONFIG_USAGE = `usage: svc runner-config -config <host configuration> [-region <name>]

  Prints the runner configuration for \`svc runner\`, taken from the host configuration.
  -region is required when the host configuration lists runners.regions (one of them); without
  runners.regions the one region is "default".
`;

export async function runnerConfigMain(argv: readonly string[]): Promise<number> {
  const parsed = parseFlags(argv, { config: "string", region: "string" });
  if (!parsed.ok || typeof parsed.flags.config !== "string") {
    if (!parsed.ok && parsed.help) {
      process.stdout.write(RUNNER_CONFIG_USAGE);
      return 0;
    }
    process.stderr.write(`svc runner-config: ${parsed.ok ? "-config <path> is required" : parsed.problem}\n${RUNNER_CONFIG_USAGE}`);
    return 2;
  }
  const configArg = parsed.flags.config;
  const read = await readConfigFile(configArg);
  const region = (parsed.flags.region as string | undefined) ?? "default";
  const problems = read.ok ? [] : read.problems;
  if (read.ok && !read.config.runners) problems.push("runners: required (the secret runner-hosts dial in with)");
  if (!regionName.safeParse(region).success) problems.push("-region: must be 1 to 32 lowercase letters, digits or dashes");
  const regions = read.ok ? Object.keys(read.config.runners?.regions ?? {}) : [];
  if (read.ok && regions.length > 0 && parsed.flags.region === undefined) {
    problems.push(`-region: required, as the host configuration lists runners.regions (${regions.join(", ")})`);
  } else if (read.ok && regions.length > 0 && !regions.includes(region)) {
    problems.push(`-region: "${region}" is not one of runners.regions (${regions.join(", ")})`);
  } else if (read.ok && regions.length === 0 && region !== "default") {
    // The service would refuse such a runner-host every time (409: region not configured).
    problems.push(`-region: "${region}" is not configured (the host configuration has no runners.regions; its one region is "default")`);
  }
  if (!read.ok || problems.length > 0) {
    for (const p of problems) process.stderr.write(`${configArg}: ${p}\n`);
    return 1;
  }
  process.stdout.write(`${JSON.stringify(runnerConfigFromHost(read.config, region), null, 2)}\n`);
  return 0;
}
