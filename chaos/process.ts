/**
 * One `svc` process started by the chaos run (`svc -no-runner` or `svc runner`), in its own
 * process group so a crash takes its children (workerd) with it, with its stderr kept to wait on
 * log lines (no polling) and to find the harness processes it started.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));

export type SvcProcess = {
  child: ChildProcess;
  stderr(): string;
  /** The current length of stderr: wait only for lines written after it. */
  mark(): number;
  waitForLog(re: RegExp, timeoutMs: number, from?: number): Promise<string>;
  /** Pids of the harness processes it reported started. */
  harnessPids(): number[];
  exited: Promise<void>;
  /** SIGKILL to the whole group: a crash, nothing of it runs after. */
  crash(): Promise<void>;
  /** SIGTERM, then SIGKILL to the group after `graceMs`. */
  stop(graceMs: number): Promise<void>;
};

export function spawnSvc(args: string[], o: { cwd: string; env: Record<string, string>; verbose?: boolean }): SvcProcess {
  const child = spawn(process.execPath, [path.join(ROOT, "cli/svc.mjs"), ...args], {
    cwd: o.cwd,
    env: { PATH: process.env.PATH ?? "", HOME: o.cwd, ...o.env },
    stdio: ["ignore", "ignore", "pipe"],
    detached: true,
  });
  let err = "";
  const waiters = new Set<{ re: RegExp; from: number; done: (line: string) => void }>();
  child.stderr!.setEncoding("utf8").on("data", (d: string) => {
    err += d;
    if (o.verbose) process.stderr.write(d);
    for (const w of [...waiters]) {
      const line = err.slice(w.from).split("\n").find((l) => w.re.test(l));
      if (line) {
        waiters.delete(w);
        w.done(line);
      }
    }
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const alive = () => child.exitCode === null && child.signalCode === null;
  const killGroup = (sig: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, sig);
    } catch {
      // the group is already gone
    }
  };
  return {
    child,
    stderr: () => err,
    mark: () => err.length,
    exited,
    harnessPids: () =>
      err
        .split("\n")
        .filter((l) => l.includes('"msg":"harness process started"'))
        .map((l) => Number(JSON.parse(l).pid)),
    waitForLog(re, timeoutMs, from = 0) {
      const seen = err.slice(from).split("\n").find((l) => re.test(l));
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const w = { re, from, done: (l: string) => (clearTimeout(t), resolve(l)) };
        const t = setTimeout(() => {
          waiters.delete(w);
          reject(new Error(`no log line ${re} within ${timeoutMs} ms; stderr tail:\n${err.slice(-3000)}`));
        }, timeoutMs);
        waiters.add(w);
        void exited.then(() => {
          if (!waiters.has(w)) return;
          waiters.delete(w);
          clearTimeout(t);
          reject(new Error(`svc ${args.join(" ")} exited before ${re}; stderr tail:\n${err.slice(-3000)}`));
        });
      });
    },
    async crash() {
      killGroup("SIGKILL");
      await exited;
    },
    async stop(graceMs) {
      if (alive()) child.kill("SIGTERM");
      const t = setTimeout(() => killGroup("SIGKILL"), graceMs);
      await exited;
      clearTimeout(t);
      killGroup("SIGKILL"); // anything of the group still running (workerd) goes with it
    },
  };
}
