/**
 * Whether `data_dir` can hold the stack's state, asked without creating anything, so `-check` can
 * say it before a start would fail: an existing path must be a directory this process can write
 * and enter; a missing one needs its nearest existing ancestor to be such a directory (the start
 * creates the rest). Without this a regular file there fails the start with mkdir's EEXIST.
 */
import { accessSync, chmodSync, constants, lstatSync, mkdirSync, statSync } from "node:fs";
import path from "node:path";

/** The problem with `dataDir` (absolute) as one sentence, or null when it is usable. */
export function dataDirProblem(dataDir: string): string | null {
  let at = dataDir;
  // The sentence names the path looked at: data_dir itself, or the ancestor that stops its creation.
  const what = () => (at === dataDir ? `data_dir ${dataDir}` : `data_dir ${dataDir} cannot be created: ${at}`);
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
      if (code === "ENOTDIR") return `data_dir ${dataDir} cannot be created: a parent of it is not a directory`;
      return `data_dir ${dataDir} cannot be read: ${code ?? String(e)}`;
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

/**
 * Creates `dataDir` if needed and makes it its owner's alone (0700): it holds every session's
 * conversation (the objects' SQLite files) and the runner secret, and harness processes run as
 * other users of the same machine (docs/configuration.md `SVC_HARNESS_UIDS`).
 */
export function makePrivateDataDir(dataDir: string): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  chmodSync(dataDir, 0o700);
}
