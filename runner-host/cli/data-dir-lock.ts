/**
 * One runner-host per `data_dir`: the runner id lives there, and two processes sharing it would
 * announce the same id and take each other's sessions. The local stack (`svc -config`) holds the
 * same lock: its objects' SQLite files live there too. The first to start holds
 * `<data_dir>/runner.lock`; a second one refuses to start and names the holder.
 *
 * Storage layout / lifecycle: `runner.lock` holds `{pid, host, boot}` as JSON, is created with
 * O_EXCL, its mtime refreshed every `REFRESH_MS` while held, and removed on a clean stop. A lock
 * left by a crash is taken over: on the same host when its pid is gone or a zombie (or is this process's own
 * pid: a restarted container reuses pids); on any host once its mtime is older than `STALE_MS`
 * (another host's replica on a shared volume, or a pid reused by an unrelated process).
 */
import { readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import path from "node:path";
import { newId } from "../../src/shared/ids.ts";
import { procState } from "../proc-state.ts";

/** How often a held lock's mtime is refreshed, ms. */
const REFRESH_MS = 5_000;
/** A lock from another host not refreshed for this long is stale, ms: four refreshes missed. */
const STALE_MS = 4 * REFRESH_MS;
const FILE = "runner.lock";

export type LockHolder = { pid: number; host: string; boot: string };
export type LockResult = { ok: true; release(): void } | { ok: false; holder: LockHolder };

export function acquireDataDirLock(dataDir: string): LockResult {
  const file = path.join(dataDir, FILE);
  const me: LockHolder = { pid: process.pid, host: hostname(), boot: newId() };
  let holder: LockHolder | undefined;
  // Twice at most: once as is, once after removing a stale lock (whoever creates it first wins).
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, `${JSON.stringify(me)}\n`, { flag: "wx", mode: 0o600 });
      return { ok: true, release: hold(file, me) };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    holder = readHolder(file);
    if (holder && isLive(holder, file)) return { ok: false, holder };
    rmSync(file, { force: true });
  }
  return { ok: false, holder: holder ?? { pid: 0, host: "unknown", boot: "" } };
}

function hold(file: string, me: LockHolder): () => void {
  const timer = setInterval(() => {
    const t = new Date();
    try {
      utimesSync(file, t, t);
    } catch {
      // Removed under us: the next start will find no lock; nothing to refresh.
    }
  }, REFRESH_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    if (readHolder(file)?.boot === me.boot) rmSync(file, { force: true });
  };
}

function readHolder(file: string): LockHolder | undefined {
  try {
    const h = JSON.parse(readFileSync(file, "utf8")) as LockHolder;
    return typeof h.pid === "number" && typeof h.host === "string" ? h : undefined;
  } catch {
    return undefined;
  }
}

function isLive(h: LockHolder, file: string): boolean {
  // On this host a gone pid is stale at once. A live one must also be refreshing: after a crash
  // (or a reboot) its pid may belong to an unrelated process, which would block every start.
  if (h.host === hostname() && (h.pid === process.pid || !pidExists(h.pid))) return false;
  try {
    return Date.now() - statSync(file).mtimeMs < STALE_MS;
  } catch {
    return false;
  }
}

/**
 * Whether a process with this pid runs (signal 0 checks, sends nothing; EPERM: it exists, not
 * ours). A zombie does not: a `svc` killed by a supervisor that has not reaped it yet is gone.
 */
export function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  return procState(pid) !== "Z"; // unreadable (no /proc): signal 0 said it exists
}
