/**
 * The `svc` command (spec "Operational behaviour": `-config <path>`, `-check`). Go-style flags:
 * one or two dashes, `-name value` or `-name=value`. Exit codes: 0 ok, 1 invalid configuration
 * or a failed start, 2 bad usage. The modules that start things are imported only when used, so
 * `-check` loads none of them and starts nothing.
 */
import type { HostConfig } from "../src/shared/config-schema.ts";
import { deployProblems } from "../src/shared/config-persistence.ts";
import { loadConfigFile, loadEnvFileBeside } from "./config-file.ts";

export const USAGE = `usage: svc [runner] -config <path> [-check [-deploy]]

  svc -config <path>          run the local stack: the service and a runner-host on this machine
  svc runner -config <path>   run a runner-host that dials the configured service

flags:
  -config <path>   host configuration file (JSON, at most 4 MiB), relative to the working directory
  -check           validate the file and every environment variable it names, then exit
  -deploy          with -check: also refuse what only the local stack can serve (filesystem persistence)
  -no-runner       local stack only: start the service without its in-process runner-host
                   (run \`svc runner\` separately; until one connects, messages wait)
  -h, -help        show this help
`;

/**
 * The runner-host entry is written separately and may not exist yet in a given build; importing it
 * through a variable keeps this file type-checking either way, and the type states what it must offer.
 */
const RUNNER_MAIN = "./runner-main.ts";
type RunnerMain = {
  runRunnerHost(o: { config: HostConfig; configPath: string }): Promise<number | void>;
};

type Args = { command: "local" | "runner"; config: string; check: boolean; runner: boolean; deploy: boolean };
type ParsedArgs = { ok: true; args: Args } | { ok: false; help: boolean; problem?: string };

export function parseArgs(argv: readonly string[]): ParsedArgs {
  const rest = [...argv];
  let command: Args["command"] = "local";
  if (rest[0] === "runner") {
    command = "runner";
    rest.shift();
  }
  let config: string | undefined;
  let check = false;
  let deploy = false;
  let runner = true;
  while (rest.length > 0) {
    const arg = rest.shift()!;
    const m = /^--?([^=-][^=]*)(?:=(.*))?$/s.exec(arg);
    if (!m) return { ok: false, help: false, problem: `unexpected argument ${JSON.stringify(arg)}` };
    const [, name, inline] = m;
    if (name === "h" || name === "help") return { ok: false, help: true };
    if (name === "config") {
      const value = inline ?? rest.shift();
      if (value === undefined || value === "") return { ok: false, help: false, problem: "-config needs a path" };
      config = value;
    } else if (name === "deploy" && inline === undefined) {
      deploy = true;
    } else if (name === "no-runner" && inline === undefined) {
      runner = false;
    } else if (name === "check") {
      if (inline !== undefined && inline !== "true" && inline !== "false") {
        return { ok: false, help: false, problem: `-check takes no value (or =true / =false), got ${JSON.stringify(inline)}` };
      }
      check = inline !== "false";
    } else {
      return { ok: false, help: false, problem: `unknown flag -${name}` };
    }
  }
  if (config === undefined) return { ok: false, help: false, problem: "-config <path> is required" };
  if (deploy && !check) return { ok: false, help: false, problem: "-deploy goes with -check" };
  return { ok: true, args: { command, config, check, runner, deploy } };
}

export async function main(argv: string[]): Promise<number> {
  const parsed = parseArgs(argv);
  if (!parsed.ok) {
    if (parsed.help) {
      process.stdout.write(USAGE);
      return 0;
    }
    process.stderr.write(`svc: ${parsed.problem}\n${USAGE}`);
    return 2;
  }
  const { command, config: configArg, check, runner, deploy } = parsed.args;

  const envFile = loadEnvFileBeside(configArg);
  if (envFile) process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level: "info", msg: "environment file loaded", path: envFile })}\n`);
  const loaded = await loadConfigFile(configArg);
  if (!loaded.ok) {
    for (const problem of loaded.problems) process.stderr.write(`${configArg}: ${problem}\n`);
    return 1;
  }
  if (check) {
    const refused = deploy ? deployProblems(loaded.config.persistence) : [];
    for (const problem of refused) process.stderr.write(`${configArg}: ${problem}\n`);
    if (refused.length > 0) return 1;
    process.stdout.write(`config ok: ${loaded.path}\n`);
    return 0;
  }

  const options = { config: loaded.config, configPath: loaded.path };
  try {
    const code =
      command === "runner"
        ? await ((await import(RUNNER_MAIN)) as RunnerMain).runRunnerHost(options)
        : await (await import("./local-stack.ts")).startLocalStack({ ...options, runner });
    // A starter that returns nothing keeps running on its own handles; it owns the exit then.
    return typeof code === "number" ? code : 0;
  } catch (e) {
    process.stderr.write(`svc: could not start: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    return 1;
  }
}
