/**
 * The `svc` command (spec "Operational behaviour": `-config <path>`, `-check`). Go-style flags:
 * one or two dashes, `-name value` or `-name=value`. Exit codes: 0 ok, 1 invalid configuration
 * or a failed start, 2 bad usage. The modules that start things are imported only when used, so
 * `-check` loads none of them and starts nothing.
 */
import { loadConfigFile, loadEnvFileBeside } from "./config-file.ts";
import { log } from "./log.ts";

export const USAGE = `usage: svc [runner] -config <path> [-check]

  svc -config <path>          run the local stack: the service and a runner-host on this machine
  svc runner -config <path>   run a runner-host that dials the configured service

flags:
  -config <path>   host configuration file (JSON, at most 4 MiB), relative to the working directory
  -check           validate the file and every environment variable it names, then exit
  -no-runner       local stack only: start the service without its in-process runner-host
                   (run \`svc runner\` separately; until one connects, messages wait)
  -h, -help        show this help
`;

type Args = { command: "local" | "runner"; config: string; check: boolean; runner: boolean };
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
  return { ok: true, args: { command, config, check, runner } };
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
  const { command, config: configArg, check, runner } = parsed.args;

  const envFile = loadEnvFileBeside(configArg);
  if (envFile) log("info", "environment file loaded", { path: envFile });
  const loaded = await loadConfigFile(configArg);
  if (!loaded.ok) {
    for (const problem of loaded.problems) process.stderr.write(`${configArg}: ${problem}\n`);
    return 1;
  }
  if (check) {
    process.stdout.write(`config ok: ${loaded.path}\n`);
    return 0;
  }

  const options = { config: loaded.config, configPath: loaded.path };
  try {
    const code =
      command === "runner"
        ? await (await import("./runner-main.ts")).runRunnerHost(options)
        : await (await import("./local-stack.ts")).startLocalStack({ ...options, runner });
    // A starter that returns nothing keeps running on its own handles; it owns the exit then.
    return typeof code === "number" ? code : 0;
  } catch (e) {
    process.stderr.write(`svc: could not start: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    return 1;
  }
}
