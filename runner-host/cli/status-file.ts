/**
 * The runner-host's local health: `<data_dir>/status.json`, rewritten (atomically) whenever the
 * control connection or the load changes and at least every `REFRESH_MS`, so a container health
 * check (`svc runner -config <file> -status`) needs no port: connected, draining, sessions,
 * capacity, and when it was written.
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pidExists } from "./data-dir-lock.ts";
import { MIN_FREE_VAR, roomOf } from "./disk-room.ts";
import type { Capacity } from "../../src/shared/runner-protocol.ts";

/** Rewrite period while nothing changes, ms. */
const REFRESH_MS = 5_000;
/** A status older than this is from a runner-host that stopped writing (hung or gone), ms. */
export const STATUS_FRESH_MS = 30_000;
const FILE = "status.json";

export type RunnerStatus = {
  pid: number;
  runner_id: string;
  boot: string;
  region: string;
  public_url: string;
  connected: boolean;
  draining: boolean;
  sessions: number;
  capacity: Capacity;
  /** Refusals in a row from the service (a wrong secret, protocol or region); 0 once connected. */
  refusals: number;
  updated_at: string;
};

/**
 * Writes the status now (a failure here stops the start: the data_dir is not usable) and keeps it
 * fresh. A later write that fails (the directory removed, the disk full) is reported through
 * `failed`, once until a write succeeds again, and does not stop the runner-host: its turns do not
 * depend on the file, and a stale file is what the health check reports then.
 */
export function startStatusFile(
  dataDir: string,
  read: () => Omit<RunnerStatus, "pid" | "updated_at">,
  failed: (error: string) => void,
): { write(): void; stop(): void } {
  const file = path.join(dataDir, FILE);
  const tmp = `${file}.tmp`;
  const writeNow = () => {
    const s: RunnerStatus = { pid: process.pid, ...read(), updated_at: new Date().toISOString() };
    writeFileSync(tmp, `${JSON.stringify(s)}\n`);
    renameSync(tmp, file);
  };
  let failing = false;
  const write = () => {
    try {
      writeNow();
      failing = false;
    } catch (e) {
      if (!failing) failed(e instanceof Error ? e.message : String(e));
      failing = true;
    }
  };
  writeNow();
  const timer = setInterval(write, REFRESH_MS);
  timer.unref();
  return { write, stop: () => clearInterval(timer) };
}

/**
 * `svc runner -status`: healthy when connected, not draining, written recently, and with at least
 * `room.minFree` bytes free on `data_dir`'s disk (0: not checked). A disk short of room is named
 * before a stale status: a runner-host that cannot write its status file goes stale 30 s later.
 */
export function readStatus(
  dataDir: string,
  room: { minFree: number; free?: (dir: string) => number } = { minFree: 0 },
): { healthy: boolean; status?: RunnerStatus; problem?: string } {
  let status: RunnerStatus;
  const file = path.join(dataDir, FILE);
  try {
    status = JSON.parse(readFileSync(file, "utf8")) as RunnerStatus;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return { healthy: false, problem: "no status file: the runner-host has not started" };
    return { healthy: false, problem: `the status file ${file} cannot be read: ${code ?? (e as Error).message}` };
  }
  const s = status as Partial<RunnerStatus> | null;
  if (typeof s !== "object" || s === null || Array.isArray(s) || typeof s.pid !== "number" || typeof s.updated_at !== "string" || Number.isNaN(Date.parse(s.updated_at))) {
    return { healthy: false, problem: `the status file ${file} is not one a runner-host writes` };
  }
  const disk = roomOf(dataDir, room.minFree, room.free);
  if (disk.short) {
    const problem = disk.error !== undefined ? `the disk of data_dir ${dataDir} cannot be read: ${disk.error}` : `the disk of data_dir ${dataDir} has ${disk.bytes} bytes free, under ${MIN_FREE_VAR} (${room.minFree})`;
    return { healthy: false, status, problem };
  }
  const age = Date.now() - Date.parse(status.updated_at);
  // A clock set back, or a hand-made file: a status from the future proves nothing about now.
  if (age < -STATUS_FRESH_MS) return { healthy: false, status, problem: "the status is dated in the future" };
  if (!(age < STATUS_FRESH_MS)) return { healthy: false, status, problem: `the status is ${Math.round(age / 1000)} s old` };
  // A fresh file outlives its writer by up to STATUS_FRESH_MS: a killed runner-host is not healthy.
  if (!pidExists(status.pid)) return { healthy: false, status, problem: `the runner-host (pid ${status.pid}) is not running` };
  if (!status.connected) return { healthy: false, status, problem: "not connected to the service" };
  if (status.draining) return { healthy: false, status, problem: "draining" };
  return { healthy: true, status };
}
