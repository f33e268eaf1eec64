/**
 * A child process whose output tests wait on (no polling): `svc runner` processes and
 * `wrangler dev`. Each wait has a timeout that rejects with the tail of the output.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";

export type Logged = {
  child: ChildProcess;
  output(): string;
  /** Resolves with the first output line matching `re` at or after offset `from`. */
  waitFor(re: RegExp, timeoutMs?: number, from?: number): Promise<string>;
  mark(): number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends `signal` and resolves when the process exited, with how long that took. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
};

/** stdout and stderr are read as one stream of lines (both carry what the tests wait for). */
export function spawnLogged(cmd: string, args: readonly string[], o: { cwd: string; env: Record<string, string>; detached?: boolean }): Logged {
  const child = spawn(cmd, args, { cwd: o.cwd, env: o.env, stdio: ["ignore", "pipe", "pipe"], detached: o.detached ?? false });
  let out = "";
  const waiters: { re: RegExp; from: number; resolve: (l: string) => void }[] = [];
  const onData = (d: string) => {
    out += d;
    if (process.env.SVC_TEST_VERBOSE) process.stderr.write(d);
    for (const w of [...waiters]) {
      const line = out.slice(w.from).split("\n").find((l) => w.re.test(l));
      if (line) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  };
  child.stdout!.setEncoding("utf8").on("data", onData);
  child.stderr!.setEncoding("utf8").on("data", onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    output: () => out,
    mark: () => out.length,
    exited,
    waitFor(re, ms = 30_000, from = 0) {
      return new Promise<string>((resolve, reject) => {
        const seen = out.slice(from).split("\n").find((l) => re.test(l));
        if (seen) return resolve(seen);
        const t = setTimeout(() => reject(new Error(`timed out waiting for ${re}; output:\n${out.slice(-4000)}`)), ms);
        waiters.push({ re, from, resolve: (l) => (clearTimeout(t), resolve(l)) });
      });
    },
    async stop(signal = "SIGTERM") {
      const t0 = performance.now();
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const r = await exited;
      return { ...r, ms: performance.now() - t0 };
    },
  };
}

/** `pid` and its descendants, parents first (from /proc; a process gone meanwhile ends its branch). */
export function processTree(pid: number): number[] {
  const all = [pid];
  for (let i = 0; i < all.length; i++) {
    try {
      for (const c of readFileSync(`/proc/${all[i]}/task/${all[i]}/children`, "utf8").trim().split(/\s+/)) if (c) all.push(Number(c));
    } catch {}
  }
  return all;
}

/** The command line of `pid`, arguments joined by spaces ("" once it is gone). */
export function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return "";
  }
}

/** A process's state, parent and group, from /proc/<pid>/stat (its name may hold spaces); undefined once gone. */
export function procStat(pid: number): { state: string; ppid: number; pgrp: number } | undefined {
  try {
    const rest = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ").at(-1)!.split(" ");
    return { state: rest[0]!, ppid: Number(rest[1]), pgrp: Number(rest[2]) };
  } catch {
    return undefined;
  }
}

/** True once `pid` has ended: gone from the process table, or a zombie not reaped yet. */
export function processEnded(pid: number): boolean {
  const s = procStat(pid);
  return s === undefined || s.state === "Z";
}
