/**
 * A user of its own for every harness process of a root runner-host. Two processes (two tenants,
 * or two processes of one tenant) never share a user, so one cannot read another's memory
 * (`/proc/<pid>/mem`), files or private directory, nor signal it: the kernel's ordinary checks
 * between users keep them apart. The ids are numeric and need no /etc/passwd entry.
 *
 * Lifecycle of an id: `acquire` takes the first id of the range that this runner-host does not hold
 * and no running process has, and claims it by making the id's private directory
 * (`svc-harness-u<id>` in the temporary directory, then owned by the id). Another runner-host on the
 * same machine may use the same range: its scan can run while this one's process is not started
 * yet, so the scan alone could give both the id; `mkdir` is atomic, so only one of them makes the
 * directory and the other moves on. (The scan starts at an offset of this process's own, so two
 * rarely look at the same ids at once.) `release`, once the harness process has exited, kills every
 * process still running as that user (a child that left the harness's process group, e.g. with
 * `setsid`, which the group kill misses), removes what the user left in the machine's shared
 * temporary directories (the next process given the id, of any tenant, would own it) and the
 * private directory, and then frees the id.
 *
 * The kill is `kill(-1, SIGKILL)` made AS that user (a shell started with its id): the kernel
 * signals every process the user owns in one pass that no fork can slip past, where a scan of /proc
 * followed by kills misses a child that keeps forking and exiting under new pids.
 */
import { chownSync, lstatSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { lstat, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Logger } from "../log.ts";
import { harnessIdentity, type Identity } from "./clean-spawn.ts";
import { spawner } from "./spawner.ts";
import { procState } from "../proc-state.ts";

/** World-writable directories a harness can leave files in, besides its private one (removed apart). */
const SHARED_TEMP_DIRS = ["/tmp", "/var/tmp", "/dev/shm"];

/**
 * Default ids, `SVC_HARNESS_UIDS` `first-last` otherwise: above 65535, so no account a Debian-like
 * host or image creates (system 0-999, people 1000-59999, reserved 60000-65535) can be one of them.
 */
export const DEFAULT_HARNESS_UIDS = { first: 100_000, last: 199_999 } as const;

export class HarnessUsers {
  readonly first: number;
  readonly last: number;
  readonly #held = new Set<number>();
  #next: number;

  constructor(range: { first: number; last: number } = DEFAULT_HARNESS_UIDS) {
    if (!(Number.isInteger(range.first) && Number.isInteger(range.last) && range.first > 0 && range.last >= range.first && range.last < 2 ** 31)) {
      throw new Error(`SVC_HARNESS_UIDS: ${range.first}-${range.last} is not a range of user ids between 1 and ${2 ** 31 - 1}`);
    }
    this.first = range.first;
    this.last = range.last;
    this.#next = range.first + (process.pid % (range.last - range.first + 1));
  }

  /** A user no other harness process (of this runner-host, or running anywhere on the machine) has. */
  acquire(): Identity {
    // An id that still owns a private directory is busy too: a runner-host killed a moment ago left
    // it (its process gone); the next process given the id, of any tenant, would own those files.
    const busy = new Set([...runningUids(), ...privateDirOwners(this)]);
    const size = this.last - this.first + 1;
    for (let i = 0; i < size; i++) {
      const uid = this.first + ((this.#next - this.first + i) % size);
      if (this.#held.has(uid) || busy.has(uid) || !claim(uid)) continue;
      this.#held.add(uid);
      this.#next = uid + 1 > this.last ? this.first : uid + 1;
      return { uid, gid: uid };
    }
    throw new Error(`every harness user id in ${this.first}-${this.last} is in use`);
  }

  /**
   * Ends whatever still runs as `uid`, removes what it left in shared temporary directories, then
   * frees it. If that fails the id stays held, never handed to another process, and it throws.
   */
  async release(uid: number): Promise<void> {
    await killEverythingOf(uid);
    await removeLeftovers(uid);
    await rm(privateDirOf(uid), { recursive: true, force: true });
    this.#held.delete(uid);
  }
}

/** The private directory of the harness process running as `uid`; making it claims the id. */
export function privateDirOf(uid: number): string {
  return path.join(tmpdir(), `svc-harness-u${uid}`);
}

/** Claims `uid` machine-wide: false when another runner-host's (or a stale) private directory has it. */
function claim(uid: number): boolean {
  const dir = privateDirOf(uid);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw e;
  }
  try {
    chownSync(dir, uid, uid);
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return true;
}

/** `SVC_HARNESS_UIDS` as a range, the default when unset. */
export function harnessUidRange(value: string | undefined): { first: number; last: number } {
  if (!value?.trim()) return DEFAULT_HARNESS_UIDS;
  const m = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(value);
  if (!m) throw new Error(`SVC_HARNESS_UIDS: ${JSON.stringify(value)} is not first-last (e.g. 100000-199999)`);
  return { first: Number(m[1]), last: Number(m[2]) };
}

/**
 * What is wrong with `SVC_HARNESS_USER` / `SVC_HARNESS_UIDS` in `env`, as one sentence, or null: a
 * runner-host refuses to start with it, instead of failing every harness start (and every turn).
 */
export function harnessUserProblem(env: Record<string, string | undefined> = process.env): string | null {
  try {
    if (harnessIdentity(env) === "own") {
      new HarnessUsers(harnessUidRange(env.SVC_HARNESS_UIDS));
      pids();
    }
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

/**
 * Younger private directories are left alone by the start-up sweep, ms: another runner-host on the
 * machine may have made one and not yet started its process (a minute is far beyond that gap).
 */
const STALE_DIR_MIN_AGE_MS = 60_000;
/** Longest a release waits for a killed user's processes to be gone, ms: far beyond a loaded machine's scheduling delay. */
const KILL_WAIT_MS = 5_000;
/** Between two looks at what is left, ms: a killed process is usually gone within one. */
const KILL_POLL_MS = 5;
/** After the youngest directory the first sweep skipped is past that age, ms (timer slack). */
const SECOND_SWEEP_MARGIN_MS = 5_000;

/**
 * At a root runner-host's start: what harness users of the range left behind when a runner-host was
 * killed before it could release them, with whatever they wrote (conversation files among them),
 * so that no process later given one of those ids, of any tenant, owns it. Removed: every entry at
 * the top of the shared temporary directories owned by an id of the range that no process runs as;
 * a private directory (`svc-harness-*`) only once it is over a minute old (another runner-host may
 * have just made it for a process not started yet; `acquire` skips its id meanwhile). Returns how
 * many entries went.
 */
export function removeStaleHarnessDirs(range: { first: number; last: number }, dirs: readonly string[] = [...new Set([...SHARED_TEMP_DIRS, tmpdir()])]): number {
  const running = runningUids();
  let removed = 0;
  for (const dir of dirs) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue; // no such directory on this machine (/dev/shm in some containers)
    }
    for (const name of names) {
      const entry = path.join(dir, name);
      const st = lstatSync(entry, { throwIfNoEntry: false });
      if (!st || st.uid < range.first || st.uid > range.last || running.has(st.uid)) continue;
      if (name.startsWith("svc-harness-") && Date.now() - st.mtimeMs < STALE_DIR_MIN_AGE_MS) continue; // a fresh one: made, its process not started yet
      rmSync(entry, { recursive: true, force: true });
      removed++;
    }
  }
  return removed;
}

/**
 * A root runner-host's start: `removeStaleHarnessDirs` now, and once more when the private
 * directories too young for it are old enough (a runner-host restarted at once after a kill left
 * them; until then their ids stay unused). The second sweep is logged, never thrown.
 */
export function sweepStaleHarnessDirs(
  range: { first: number; last: number },
  log: Logger,
  o: { laterMs?: number; dirs?: readonly string[] } = {},
): void {
  removeStaleHarnessDirs(range, o.dirs);
  setTimeout(() => {
    try {
      const removed = removeStaleHarnessDirs(range, o.dirs);
      if (removed > 0) log("info", "removed what killed harness users left", { entries: removed });
    } catch (e) {
      log("error", "could not remove what killed harness users left", { error: (e as Error).message });
    }
  }, o.laterMs ?? STALE_DIR_MIN_AGE_MS + SECOND_SWEEP_MARGIN_MS).unref();
}

/** Ids of the range that own a private directory in the temporary directory. */
function privateDirOwners(range: { first: number; last: number }): number[] {
  const owners: number[] = [];
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith("svc-harness-")) continue;
    const st = lstatSync(path.join(tmpdir(), name), { throwIfNoEntry: false });
    if (st && st.uid >= range.first && st.uid <= range.last) owners.push(st.uid);
  }
  return owners;
}

/** The owners of every running process (a /proc/<pid> directory belongs to the process's user). */
function runningUids(): Set<number> {
  const uids = new Set<number>();
  for (const pid of pids()) {
    const uid = ownerOf(pid);
    if (uid !== undefined) uids.add(uid);
  }
  return uids;
}

/**
 * `kill -9 -1` run as `uid` (every process of that user but the shell itself, in one pass), then
 * until none of its processes is left: a killed process stays in /proc until it is scheduled to
 * exit, which on a loaded machine is not at once, and the id must not be handed on while one is.
 * A zombie is gone already (it runs nothing; its parent, or init, reaps it).
 */
async function killEverythingOf(uid: number): Promise<void> {
  // Through the process starter (./spawner.ts): a fork of the runner-host holds its event loop.
  // No /bin/sh: the scan below is all there is.
  await spawner().run({ file: "/bin/sh", args: ["-c", "kill -9 -1"], uid, gid: uid }).catch(() => {});
  const deadline = Date.now() + KILL_WAIT_MS;
  for (;;) {
    // What the one pass could not reach (a process that was starting under another id an instant ago).
    const left = pids().filter((p) => ownerOf(p) === uid && !isZombie(p));
    if (left.length === 0) return;
    if (Date.now() > deadline) throw new Error(`harness user ${uid}: ${left.length} process(es) still running ${KILL_WAIT_MS} ms after SIGKILL`);
    for (const pid of left) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // ESRCH: it ended meanwhile.
      }
    }
    await new Promise((resolve) => setTimeout(resolve, KILL_POLL_MS));
  }
}

/** Exited: a zombie, or gone while we looked. */
function isZombie(pid: number): boolean {
  const state = procState(pid);
  return state === undefined || state === "Z";
}

/** Entries owned by `uid` at the top of the shared temporary directories, removed with their contents. */
async function removeLeftovers(uid: number): Promise<void> {
  for (const dir of new Set([...SHARED_TEMP_DIRS, tmpdir()])) {
    const names = await readdir(dir).catch(() => [] as string[]);
    await Promise.all(
      names.map(async (name) => {
        const entry = path.join(dir, name);
        const st = await lstat(entry).catch(() => undefined);
        // Nothing of the user runs any more, so nothing can swap an entry for a link meanwhile; rm
        // never follows links either.
        if (st?.uid === uid) await rm(entry, { recursive: true, force: true }).catch(() => {});
      }),
    );
  }
}

/**
 * Every running process. Throws when /proc cannot be read: without it no id can be known free and
 * nothing left running can be found, so a harness start fails saying so (and a runner-host that
 * cannot read it refuses to start, `harnessUserProblem`) rather than sharing a user unseen.
 */
function pids(): number[] {
  try {
    return readdirSync("/proc").filter((n) => /^\d+$/.test(n)).map(Number);
  } catch (e) {
    throw new Error(`harness users: cannot list running processes in /proc (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
}

function ownerOf(pid: number): number | undefined {
  try {
    return statSync(`/proc/${pid}`).uid;
  } catch {
    return undefined; // it ended while we looked
  }
}
