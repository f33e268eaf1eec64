/**
 * Spawns the real local stack (`node cli/svc.mjs -config <tmp>`) with a temporary config and
 * environment, and waits on its own output (no polling): the stdout line with the URL, then the
 * runner-host's "connected" log line.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { REFERENCE_HARNESS_COMMAND as BUILT_HARNESS_COMMAND } from "../../scripts/build-harness.ts";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { commandOf, processTree } from "./process.ts";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** Stacks this test file started, running or stopped: a failed test prints what they logged during it (test/e2e/setup.ts). */
export const startedStacks = new Set<Stack>();

export type Stack = {
  url: string;
  dir: string;
  child: ChildProcess;
  stderr: () => string;
  /** Resolves when a stderr line matching `re` appears at or after offset `from` (default: anywhere). */
  waitForLog(re: RegExp, timeoutMs?: number, from?: number): Promise<string>;
  /** The current length of stderr, to wait only for lines written after this point. */
  mark(): number;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
  /** SIGKILL to the stack's process group and its workerd: a crash, nothing runs after. */
  crash(): Promise<void>;
};

export type StackOptions = {
  config: Record<string, unknown>;
  env: Record<string, string>;
  dir?: string;
  /** false: start the Worker alone (`-no-runner`), so accepted messages wait and no turn runs. */
  runner?: boolean;
  /** The stack's working directory (default: `dir`). */
  cwd?: string;
  /** `data_dir` as written in the config, absolute or relative to `cwd` (default: `<dir>/data`). */
  dataDir?: string;
  /** A descriptor the stack inherits as `inherit.at` (as a supervisor might leave one open). */
  inherit?: { fd: number; at: number };
};

export async function startStack(o: StackOptions, timeoutMs = 30_000): Promise<Stack> {
  const dir = o.dir ?? mkdtempSync(path.join(tmpdir(), "svc-e2e-"));
  const configPath = path.join(dir, "config.json");
  writeFileSync(configPath, JSON.stringify({ listen: "127.0.0.1:0", data_dir: o.dataDir ?? path.join(dir, "data"), ...o.config }));
  const args = [path.join(ROOT, "cli/svc.mjs"), "-config", configPath, ...(o.runner === false ? ["-no-runner"] : [])];
  const child = spawn(process.execPath, args, {
    cwd: o.cwd ?? dir,
    env: { PATH: process.env.PATH ?? "", HOME: dir, ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}), ...o.env },
    stdio: ["ignore", "pipe", "pipe", ...(o.inherit ? [...Array<"ignore">(o.inherit.at - 3).fill("ignore"), o.inherit.fd] : [])],
    detached: true,
  });
  let out = "";
  let err = "";
  const waiters: { re: RegExp; from: number; resolve: (l: string) => void }[] = [];
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => {
    err += d;
    if (process.env.SVC_TEST_VERBOSE) process.stderr.write(d);
    for (const w of [...waiters]) {
      const line = err.slice(w.from).split("\n").find((l) => w.re.test(l));
      if (line) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );

  const waitForLog = (re: RegExp, ms = timeoutMs, from = 0) =>
    new Promise<string>((resolve, reject) => {
      const seen = err.slice(from).split("\n").find((l) => re.test(l));
      if (seen) return resolve(seen);
      const t = setTimeout(() => reject(new Error(`timed out waiting for log ${re}; stderr:\n${err.slice(-4000)}`)), ms);
      waiters.push({ re, from, resolve: (l) => (clearTimeout(t), resolve(l)) });
    });

  const url = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`stack did not start; stderr:\n${err.slice(-4000)}`)), timeoutMs);
    const check = () => {
      const m = /svc: listening on (\S+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(m[1]!);
      }
    };
    child.stdout!.on("data", check);
    exited.then(({ code }) => reject(new Error(`stack exited with ${code}; stderr:\n${err.slice(-4000)}`)));
  });
  if (o.runner !== false) await waitForLog(/"msg":"runner-host connected"/);

  const stack: Stack = {
    url,
    dir,
    child,
    stderr: () => err,
    waitForLog,
    mark: () => err.length,
    async crash() {
      // workerd runs in a session of its own (runner-host/cli/workerd-session.ts), outside the group.
      const workerd = processTree(child.pid!).filter((pid) => commandOf(pid).includes("workerd"));
      process.kill(-child.pid!, "SIGKILL");
      for (const pid of workerd) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // ESRCH: its parent-death signal was first.
        }
      }
      await exited;
    },
    async stop(signal = "SIGTERM") {
      const t0 = performance.now();
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const r = await exited;
      return { ...r, ms: performance.now() - t0 };
    },
  };
  startedStacks.add(stack);
  return stack;
}

/** A secret of the right length for token variables. */
export function secret(label: string): string {
  return `${label}-${"x".repeat(32)}`.slice(0, 40);
}

/**
 * Pids of harness processes that took sessions, in log order: processes started for a session,
 * and spares when a session took one. Spares waiting unused (`"spare":true` when started) are not
 * listed: killing one would hit no session. A spare taken before it was ready logs `pid` -1 and
 * then its "started" line (no longer a spare).
 */
export function sessionProcessPids(stderr: string): number[] {
  return stderr
    .split("\n")
    .filter((l) => (l.includes('"msg":"harness process started"') && !l.includes('"spare":true')) || l.includes('"msg":"spare harness process taken"'))
    .map((l) => JSON.parse(l).pid as number)
    .filter((pid) => pid > 0); // a spare taken while still starting: its "started" line follows
}

/**
 * The reference harness command (relative: the repository root is every test's working directory)
 * and `harnesses` of a stack that runs it as `pi` (absolute). The tests' global setup builds it.
 */
export const REFERENCE_HARNESS_COMMAND = [...BUILT_HARNESS_COMMAND];
export const REFERENCE_HARNESSES = { pi: { command: REFERENCE_HARNESS_COMMAND.map((a) => (a.endsWith(".mjs") ? `${ROOT}${a}` : a)) } };

/** `providers` of a stack whose `openai/*` models are served by the scripted provider at `url`. */
export function scriptedProviders(url: string, keyEnv = "OPENAI_KEY") {
  return { openai: { api_key_env: keyEnv, base_url: url, api: "openai-completions" } };
}

export type ScriptedStack = { provider: ScriptedProvider; stack: Stack; stop(): Promise<void> };

/**
 * The usual end-to-end rig: the scripted provider, and a stack that runs the reference harness as
 * `pi` against it (`harnesses` and `providers` default to that; the config may override either).
 */
export async function startScriptedStack(o: StackOptions): Promise<ScriptedStack> {
  const provider = await startScriptedProvider();
  try {
    const stack = await startStack({ ...o, config: { harnesses: REFERENCE_HARNESSES, providers: scriptedProviders(provider.url), ...o.config } });
    return { provider, stack, stop: async () => (await stack.stop(), await provider.close()) };
  } catch (e) {
    await provider.close();
    throw e;
  }
}

/** Config of a one-tenant stack (`MANAGE` token, tenant `t`) running the reference harness against the scripted provider at `url`. */
export function oneTenantConfig(url: string, limits: Record<string, number> = {}) {
  return {
    tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
    harnesses: REFERENCE_HARNESSES,
    providers: scriptedProviders(url),
    limits,
  };
}
