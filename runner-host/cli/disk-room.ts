/**
 * Room on the disks a process of ours writes to (docs/api.md "Shutdown and readiness"). With
 * `data_dir` (the objects' SQLite files) or a `filesystem` persistence directory full, new work
 * would fail with `500`, so the local stack's readiness turns `503` first: the Worker asks through
 * the LOCAL_DISK service binding on each readiness probe (src/routes/health.ts), and this process
 * answers with one `statfs` per directory. No timer: an idle stack does no work for it. A deployed
 * Worker has no such binding (its storage is Cloudflare's, not a disk of ours). A runner-host's
 * health check (`svc runner -status`, runner-host/cli/status-file.ts) reads its `data_dir` the same way.
 *
 * Lifecycle: the handler remembers which directories were short of room at the last probe, so a
 * warning is logged once when one runs short and a line when it has room again, not per probe.
 */
import { statfsSync } from "node:fs";
import path from "node:path";
import { LOCAL_DISK_ROOM_URL } from "../../src/runtime-constants.ts";
import type { Logger } from "../log.ts";

export const MIN_FREE_VAR = "SVC_MIN_FREE_BYTES";
/**
 * Free bytes a directory needs for readiness, by default: room for a few turns' largest records
 * (4 MiB each), SQLite's journal beside them and the logs. `SVC_MIN_FREE_BYTES` sets it; 0 turns
 * the check off.
 */
export const DEFAULT_MIN_FREE_BYTES = 64 * 1024 * 1024;
const ROOM_PATH = new URL(LOCAL_DISK_ROOM_URL).pathname;

/**
 * Bytes an unprivileged writer may still use in the file system holding `dir`. A directory not
 * made yet (a `filesystem` store before its first upload) counts the disk of its nearest existing
 * parent, where it will be made. Synchronous: one `statfs` system call per directory level.
 */
export function freeBytes(dir: string): number {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    try {
      const s = statfsSync(d);
      return s.bavail * s.bsize;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT" || path.dirname(d) === d) throw e;
    }
  }
}

/** `SVC_MIN_FREE_BYTES` read from `env`: the threshold, or a sentence saying what is wrong with it. */
export function minFreeFrom(env: NodeJS.ProcessEnv): { ok: true; bytes: number } | { ok: false; problem: string } {
  const raw = env[MIN_FREE_VAR];
  if (raw === undefined || raw === "") return { ok: true, bytes: DEFAULT_MIN_FREE_BYTES };
  if (!/^\d{1,16}$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    return { ok: false, problem: `${MIN_FREE_VAR} must be a whole number of bytes (0 turns the disk check off), not ${JSON.stringify(raw.slice(0, 40))}` };
  }
  return { ok: true, bytes: Number(raw) };
}

/**
 * Whether `dir`'s disk has `minFree` bytes free: its free bytes (`Infinity` when `minFree` is 0, the
 * check off, and nothing is read), or -1 and the error's code for a disk that cannot be read, which
 * counts as short.
 */
export function roomOf(dir: string, minFree: number, free: (dir: string) => number = freeBytes): { short: boolean; bytes: number; error?: string } {
  if (minFree === 0) return { short: false, bytes: Infinity };
  try {
    const bytes = free(dir);
    return { short: bytes < minFree, bytes };
  } catch (e) {
    return { short: true, bytes: -1, error: (e as NodeJS.ErrnoException).code ?? (e as Error).message };
  }
}

/**
 * The LOCAL_DISK service: `LOCAL_DISK_ROOM_URL` answers `{"ok": true}` while every directory has at least
 * `minFree` bytes free, else `{"ok": false}`. A directory whose disk cannot be read counts as short
 * (logged with `free_bytes` -1 and the error's code).
 */
export function diskRoomHandler(
  dirs: readonly string[],
  minFree: number,
  log: Logger,
  free: (dir: string) => number = freeBytes,
): (request: Request) => Response {
  const reported = new Set<string>(); // directories short of room at the last probe
  return (request) => {
    if (new URL(request.url).pathname !== ROOM_PATH) return new Response("no such route", { status: 404 });
    let ok = true;
    for (const dir of dirs) {
      const { short, bytes, error } = roomOf(dir, minFree, free);
      if (!short) {
        if (reported.delete(dir)) log("info", "disk has room again: readiness no longer held back", { dir, free_bytes: bytes });
        continue;
      }
      ok = false;
      if (!reported.has(dir)) {
        reported.add(dir);
        log("warn", "disk short of room: readiness answers 503 until it is freed", { dir, free_bytes: bytes, min_free_bytes: minFree, error });
      }
    }
    return Response.json({ ok });
  };
}
