/**
 * How a harness child is started so that it holds nothing of the runner-host's: no open
 * descriptor but stdio, and, when the runner-host runs as root, not root's identity.
 *
 * Started through the process starter (./spawner.ts), the wrapper first waits on its gate (below).
 *
 * Descriptors: Node opens its own files close-on-exec, but descriptors the runner-host itself
 * inherited (from a supervisor, a CI runner, a shell) are passed on to every child. The child is
 * therefore started through a tiny wrapper — this Node binary with a one-line script — that closes
 * every descriptor above 2 listed in /proc/self/fd that lacks close-on-exec, and then replaces
 * itself with the harness (`process.execve`, no PATH search, so the command is resolved here
 * first). `/bin/sh` cannot do this portably: dash only addresses descriptors 0-9. Measured cost:
 * see docs/design-notes.md.
 *
 * Only descriptors without close-on-exec: the wrapper's own Node holds epoll, eventfd and pipe
 * descriptors of its event loops (all close-on-exec, so execve drops them anyway), and its platform
 * threads keep using them until execve; closing one under them makes libuv abort the wrapper
 * (SIGABRT before the harness ever starts: seen once in CI, reproduced by closing them in a
 * running Node). /proc/self/fdinfo's `flags` (octal) carries O_CLOEXEC for each descriptor.
 *
 * Identity: as root, each harness process runs as an unprivileged user of its own
 * (./harness-users.ts), or as the one user `SVC_HARNESS_USER` names; Node's spawn sets uid/gid
 * (and drops supplementary groups) before the wrapper runs.
 */
import { accessSync, constants, readFileSync, realpathSync, statSync } from "node:fs";
import { delimiter, dirname, isAbsolute, join, resolve } from "node:path";

/**
 * Closes every inherited descriptor above stderr: those without O_CLOEXEC (0o2000000 in fdinfo's
 * octal `flags`). One gone before its fdinfo is read, like the directory listing's own, is skipped.
 */
export const CLOSE_INHERITED = [
  'const fs = require("node:fs");',
  'let fds = []; try { fds = fs.readdirSync("/proc/self/fd"); } catch {}',
  "for (const n of fds) { const fd = Number(n); if (fd <= 2) continue;",
  '  let flags; try { flags = parseInt(/^flags:\\s*([0-7]+)/m.exec(fs.readFileSync("/proc/self/fdinfo/" + fd, "utf8"))[1], 8); } catch { continue; }',
  "  if ((flags & 0o2000000) === 0) { try { fs.closeSync(fd); } catch {} } }",
].join(" ");

/**
 * Waits until descriptor 3, the gate the process starter (./spawner-helper.ts) gives the child,
 * is closed or written: by then the runner-host holds the child's pipes. Without a descriptor 3
 * (EBADF) it goes on at once. Node leaves a child's descriptor 3 blocking, so the read sleeps.
 */
const WAIT_FOR_GATE = 'try { require("node:fs").readSync(3, Buffer.alloc(1)); } catch {}';

/** The wrapper: wait for its pipes to be handed over, close what was inherited, then exec the harness in place. */
const WRAPPER = `${WAIT_FOR_GATE} ${CLOSE_INHERITED} process.execve(process.argv[1], process.argv.slice(1), process.env);`;

export type Identity = { uid: number; gid: number };

/** argv for `spawn` that runs `argv` (already resolved by `resolveCommand`) through the wrapper. */
export function wrappedCommand(argv: readonly string[], path: string | undefined): [string, string[]] {
  const [file, ...args] = argv;
  return [process.execPath, ["--no-warnings", "-e", WRAPPER, "--", lookPath(file!, path), ...args]];
}

/**
 * `name` found on `path` (what a shell would run), as the user the harness runs as when that is
 * not this process's (`as`): an entry that user cannot run is passed over, as its own shell
 * would. A root runner-host's PATH often leads with directories under /root (a version manager's
 * shims), which X_OK alone would accept. An absolute or relative path is returned as it is.
 */
export function lookPath(name: string, path: string | undefined, as?: Identity): string {
  if (name.includes("/") || isAbsolute(name)) return name;
  for (const dir of (path ?? "/usr/bin:/bin").split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    if (cannotRun(candidate, as) === undefined) return candidate;
  }
  return name; // execve fails with ENOENT, reported as the harness exiting before ready
}

/**
 * Why `file` cannot be executed (an errno code and, for another user, what stops it), or
 * undefined when it can. For another user (`as`), from the mode bits: the file, and every
 * directory on its path and on the path it resolves to, must grant that user execute (search) as
 * owner, as group (its primary group only: spawn drops supplementary groups) or as anyone.
 */
export function cannotRun(file: string, as?: Identity): string | undefined {
  try {
    accessSync(file, constants.X_OK);
    if (!as) return undefined;
    const real = realpathSync(file);
    if (!statSync(real).isFile()) return "EACCES (not a file)";
    for (const p of new Set([...ancestors(resolve(file)), ...ancestors(real), real])) {
      if (!executableBy(statSync(p), as)) return `EACCES (${p} is not ${p === real ? "executable" : "searchable"} by uid ${as.uid})`;
    }
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? "failed";
  }
}

function ancestors(p: string): string[] {
  const out: string[] = [];
  for (let d = dirname(p); ; d = dirname(d)) {
    out.push(d);
    if (d === dirname(d)) return out;
  }
}

function executableBy(st: { uid: number; gid: number; mode: number }, as: Identity): boolean {
  if (as.uid === 0) return (st.mode & 0o111) !== 0;
  if (st.uid === as.uid) return (st.mode & 0o100) !== 0;
  if (st.gid === as.gid) return (st.mode & 0o010) !== 0;
  return (st.mode & 0o001) !== 0;
}

/**
 * Who harness processes run as: "own" = each a user of its own (a root runner-host, by default);
 * an identity = the one user `SVC_HARNESS_USER` names (a user name from /etc/passwd or `uid:gid`);
 * undefined = the runner-host's own identity (it is not root, or `SVC_HARNESS_USER=root`).
 */
export function harnessIdentity(env: Record<string, string | undefined> = process.env): Identity | "own" | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const want = env.SVC_HARNESS_USER?.trim();
  if (!want) return "own";
  if (want === "root" || want === "0" || want === "0:0") return undefined;
  const numeric = /^(\d+):(\d+)$/.exec(want);
  if (numeric) return { uid: Number(numeric[1]), gid: Number(numeric[2]) };
  const line = readFileSync("/etc/passwd", "utf8").split("\n").find((l) => l.split(":")[0] === want);
  if (!line) throw new Error(`SVC_HARNESS_USER: no user ${JSON.stringify(want)} in /etc/passwd`);
  const [, , uid, gid] = line.split(":");
  return { uid: Number(uid), gid: Number(gid) };
}
