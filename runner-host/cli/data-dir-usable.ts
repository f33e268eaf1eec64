/**
 * Whether `data_dir` (or the `filesystem` persistence `directory`) can hold what the stack writes
 * there, asked without creating anything, so `-check` can say it before a start would fail: an
 * existing path must be a directory this process can write and enter; a missing one needs its
 * nearest existing ancestor to be such a directory (the start creates the rest). Without this a
 * regular file there fails the start with mkdir's EEXIST.
 */
import { accessSync, chmodSync, constants, lstatSync, mkdirSync, statSync } from "node:fs";
import path from "node:path";

/** The problem with `dataDir` (absolute) as one sentence, or null when it is usable. */
export function dataDirProblem(dataDir: string, field = "data_dir"): string | null {
  let at = dataDir;
  // The sentence names the path looked at: data_dir itself, or the ancestor that stops its creation.
  const what = () => (at === dataDir ? `${field} ${dataDir}` : `${field} ${dataDir} cannot be created: ${at}`);
  for (;;) {
    let isDir: boolean;
    try {
      isDir = statSync(at).isDirectory();
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      // A link whose target is missing: mkdir would fail on it, not create the target.
      if (code === "ENOENT" && lstatSync(at, { throwIfNoEntry: false })?.isSymbolicLink()) return `${what()} is a symbolic link to nothing`;
      if (code === "ENOENT" && path.dirname(at) !== at) {
        at = path.dirname(at);
        continue;
      }
      if (code === "ENOTDIR") return `${field} ${dataDir} cannot be created: a parent of it is not a directory`;
      return `${field} ${dataDir} cannot be read: ${code ?? String(e)}`;
    }
    if (!isDir) return `${what()} is not a directory`;
    try {
      accessSync(at, constants.W_OK | constants.X_OK);
    } catch {
      return `${what()} is not writable by this process`;
    }
    return null;
  }
}

/** The `filesystem` persistence `directory`'s problem (relative: from the working directory), or null. */
export function storeDirProblem(config: { persistence?: { provider: string; directory?: string } | null }): string | null {
  const p = config.persistence;
  if (p?.provider !== "filesystem" || p.directory === undefined) return null;
  return dataDirProblem(path.resolve(p.directory), "persistence.directory");
}

/**
 * Creates `dataDir` if needed and makes it its owner's alone (0700): it holds every session's
 * conversation (the objects' SQLite files) and the runner secret, and harness processes run as
 * other users of the same machine (docs/configuration.md `SVC_HARNESS_UIDS`). Returns the problem
 * when it cannot, as one sentence, else null.
 */
export function makePrivateDataDir(dataDir: string): string | null {
  try {
    makeDirs(dataDir, 0o700);
    chmodSync(dataDir, 0o700);
    return null;
  } catch (e) {
    return `data_dir ${dataDir} cannot be created: ${(e as Error).message}`;
  }
}

/**
 * `mkdir -p`, one level at a time from the nearest existing ancestor. Node's own recursive mkdir
 * spins forever (a core busy, no error) where mkdir answers ENOENT under an existing parent, as in
 * /proc; this one throws that error.
 */
export function makeDirs(dir: string, mode = 0o777): void {
  for (const d of missing(dir)) {
    try {
      mkdirSync(d, { mode });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
  }
}

/** The ancestors of `dir` (itself included) that do not exist, outermost first. */
function missing(dir: string): string[] {
  const todo: string[] = [];
  for (let at = path.resolve(dir); statSync(at, { throwIfNoEntry: false }) === undefined; at = path.dirname(at)) {
    todo.unshift(at);
    if (path.dirname(at) === at) break;
  }
  return todo;
}
