/**
 * The `svc` command (`-config <path>`, `-check`: docs/configuration.md), and its deployment
 * subcommands (`deploy`, `secrets`, `runner-config`: runner-host/cli/deploy/). Go-style flags:
 * one or two dashes, `-name value` or `-name=value`. Exit codes: 0 ok, 1 invalid configuration
 * or a failed start, 2 bad usage. The modules that start things are imported only when used, so
 * `-check` loads none of them and starts nothing.
 */
import { loadConfigFile, loadEnvFileChecked, resolveDataDir } from "./config-file.ts";
import { dataDirProblem, storeDirProblem } from "./data-dir-usable.ts";
import { log } from "../log.ts";
import { StartRefused } from "./start-refused.ts";
import { loadRunnerConfigFile } from "./runner-config-file.ts";

export const USAGE = `usage: svc [runner] -config <path> [-check]

  svc -config <path>          run the local stack: the service and a runner-host on this machine
  svc runner -config <path>   run a runner-host that dials the configured service (a runner
                              configuration, or a host configuration it takes its fields from)
  svc deploy -config <path>   check the host configuration, build it into the Worker, wrangler deploy
  svc secrets -config <path>  list (or -out: write) the variables the Worker needs as secrets
  svc runner-config -config <path>
                              print the runner configuration derived from a host configuration

flags:
  -config <path>   host configuration file (JSON, at most 4 MiB), relative to the working directory
  -check           validate the file and every environment variable it names, then exit
  -no-runner       local stack only: start the service without its in-process runner-host
                   (run \`svc runner\` separately; until one connects, messages wait)
  -status          svc runner only: print the runner-host's status file; exit 0 when it is
                   connected, not draining and recent, and data_dir's disk has
                   SVC_MIN_FREE_BYTES free (a container health check)
  -h, -help        show this help

  svc deploy -help, svc secrets -help: their own flags.
`;

type Args = { command: "local" | "runner"; config: string; check: boolean; runner: boolean; status: boolean };
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
  let status = false;
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
    } else if (name === "status" && inline === undefined && command === "runner") {
      status = true;
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
  return { ok: true, args: { command, config, check, runner, status } };
}

/** Subcommands with flags of their own, loaded only when used. */
const SUBCOMMANDS: Record<string, () => Promise<(argv: string[]) => Promise<number>>> = {
  deploy: async () => (await import("./deploy/deploy-command.ts")).deployMain,
  secrets: async () => (await import("./deploy/secrets-command.ts")).secretsMain,
  "runner-config": async () => (await import("./deploy/runner-config-command.ts")).runnerConfigMain,
};

export async function main(argv: string[]): Promise<number> {
  const sub = argv[0] !== undefined && Object.hasOwn(SUBCOMMANDS, argv[0]) ? SUBCOMMANDS[argv[0]] : undefined;
  if (sub) return (await sub())(argv.slice(1));
  const parsed = parseArgs(argv);
  if (!parsed.ok) {
    if (parsed.help) {
      process.stdout.write(USAGE);
      return 0;
    }
    process.stderr.write(`svc: ${parsed.problem}\n${USAGE}`);
    return 2;
  }
  const { command, config: configArg, check, runner, status } = parsed.args;

  const env = loadEnvFileChecked(configArg);
  if (!env.ok) {
    if (check) process.stderr.write(`${env.problem}\n`);
    else log("error", `svc: could not start: ${env.problem}`);
    return 1;
  }
  if (env.file) log("info", "environment file loaded", { path: env.file });
  if (command === "runner") return runRunner(configArg, check, status);
  const loaded = await loadConfigFile(configArg);
  if (!loaded.ok || check) return reportConfig(configArg, loaded, check);

  const options = { config: loaded.config, configPath: loaded.path };
  return start(() => import("./local-stack.ts").then((m) => m.startLocalStack({ ...options, runner })));
}

/**
 * A config that does not load: its problems on stderr (exit 1); one that does, under `-check`:
 * exit 0 once its data_dir is usable too (looked at, not created). `-check` prints the problems
 * as plain lines for a person; a start that refuses the file logs them as JSON lines, like every
 * other start failure.
 */
function reportConfig(
  configArg: string,
  loaded: { ok: true; path: string; config: { data_dir: string; persistence?: { provider: string; directory?: string } | null } } | { ok: false; problems: string[] },
  check: boolean,
): number {
  const unusable = loaded.ok ? [dataDirProblem(resolveDataDir(loaded.config)), storeDirProblem(loaded.config)].filter((p) => p !== null) : [];
  const problems = loaded.ok ? unusable : loaded.problems;
  for (const problem of problems) {
    if (check) process.stderr.write(`${configArg}: ${problem}\n`);
    else log("error", `svc: could not start: ${configArg}: ${problem}`);
  }
  if (!loaded.ok || problems.length > 0) return 1;
  process.stdout.write(`config ok: ${loaded.path}\n`);
  return 0;
}

/** `svc runner`: only the variables a runner-host reads are required (none for `-status`). */
async function runRunner(configArg: string, check: boolean, status: boolean): Promise<number> {
  const loaded = await loadRunnerConfigFile(configArg, process.env, { checkEnv: !status });
  if (!loaded.ok || check) return reportConfig(configArg, loaded, check);
  const runnerMain = () => import("./runner-command.ts");
  if (status) return (await runnerMain()).printRunnerStatus(loaded.config);
  return start(async () => (await runnerMain()).runRunnerHost({ config: loaded.config, configPath: loaded.path }));
}

async function start(run: () => Promise<number | void>): Promise<number> {
  // What a stack or runner-host writes (event logs, checkpoints, the runner secret, harness
  // directories) is tenants' data: readable by this user only, whatever the caller's umask.
  process.umask(0o077);
  try {
    const code = await run();
    // A starter that returns nothing keeps running on its own handles; it owns the exit then.
    return typeof code === "number" ? code : 0;
  } catch (e) {
    // A JSON line like every other log line; the stack only for a failure the service did not name.
    const message = e instanceof Error ? e.message : String(e);
    log("error", `svc: could not start: ${message}`, e instanceof Error && e.stack && !(e instanceof StartRefused) ? { stack: e.stack } : {});
    return 1;
  }
}
