/**
 * The runner-host's status file (runner-host/cli/status-file.ts): a write that fails after start
 * (the data_dir removed, the disk full) is reported once and does not stop the runner-host, whose
 * turns do not depend on the file; the health check then sees a stale or missing status, and a
 * fresh one whose writer died is not healthy either. A data_dir disk short of room
 * (`SVC_MIN_FREE_BYTES`) is not healthy, and is named before the stale status it leads to.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readStatus, startStatusFile, STATUS_FRESH_MS } from "../../runner-host/cli/status-file.ts";

const status = () => ({
  runner_id: "r",
  boot: "b",
  region: "default",
  public_url: "http://127.0.0.1:1",
  connected: true,
  draining: false,
  sessions: 0,
  capacity: { active: 0, active_limit: 1, loaded: 0, loaded_limit: 1, idle: 0 },
  refusals: 0,
});

describe("runner-host status file", () => {
  it("a write that fails after start is reported once, does not throw, and writing resumes when it can", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "svc-status-"));
    const failures: string[] = [];
    const file = startStatusFile(dir, status, (e) => failures.push(e));
    try {
      expect(readStatus(dir).healthy).toBe(true);
      rmSync(dir, { recursive: true });
      expect(() => file.write()).not.toThrow();
      file.write();
      expect(failures).toHaveLength(1);
      expect(failures[0]).toMatch(/ENOENT/);
      mkdirSync(dir);
      file.write();
      expect(readStatus(dir).healthy).toBe(true);
      rmSync(dir, { recursive: true });
      file.write();
      expect(failures).toHaveLength(2);
    } finally {
      file.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a fresh status whose writer is gone (a killed runner-host) is not healthy", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "svc-status-"));
    try {
      const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60_000)"], { stdio: "ignore" });
      await once(child, "spawn");
      const written = { pid: child.pid!, ...status(), updated_at: new Date().toISOString() };
      writeFileSync(path.join(dir, "status.json"), JSON.stringify(written));
      expect(readStatus(dir).healthy).toBe(true);
      child.kill("SIGKILL");
      await once(child, "exit");
      expect(readStatus(dir)).toMatchObject({ healthy: false, problem: `the runner-host (pid ${child.pid}) is not running` });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("says the runner-host has not started only when there is no status file; a torn, foreign or future one is named as such", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "svc-status-"));
    try {
      expect(readStatus(dir)).toEqual({ healthy: false, problem: "no status file: the runner-host has not started" });
      writeFileSync(path.join(dir, "status.json"), '{"pid": 1, "runner_');
      expect(readStatus(dir)).toMatchObject({ healthy: false, problem: expect.stringMatching(/^the status file .*status\.json cannot be read: /) });
      for (const text of ["null", "[]", "{}", '"x"', '{"pid":1,"updated_at":null}']) {
        writeFileSync(path.join(dir, "status.json"), text);
        expect(readStatus(dir), text).toMatchObject({ healthy: false, problem: expect.stringMatching(/is not one a runner-host writes$/) });
      }
      writeFileSync(path.join(dir, "status.json"), JSON.stringify({ pid: process.pid, ...status(), updated_at: "2999-01-01T00:00:00.000Z" }));
      expect(readStatus(dir)).toMatchObject({ healthy: false, problem: "the status is dated in the future" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a data_dir that cannot be written stops the start", () => {
    const dir = path.join(tmpdir(), `svc-status-missing-${process.pid}`, "nested");
    expect(() => startStatusFile(dir, status, () => {})).toThrow(/ENOENT/);
  });

  it("is not healthy when data_dir's disk has less than the minimum free, at one byte under it, and names the disk before a stale status", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "svc-status-"));
    const write = (ageMs: number) =>
      writeFileSync(path.join(dir, "status.json"), JSON.stringify({ pid: process.pid, ...status(), updated_at: new Date(Date.now() - ageMs).toISOString() }));
    try {
      write(0);
      expect(readStatus(dir, { minFree: 100, free: () => 100 })).toMatchObject({ healthy: true });
      expect(readStatus(dir, { minFree: 100, free: () => 99 })).toMatchObject({
        healthy: false,
        status: { connected: true },
        problem: `the disk of data_dir ${dir} has 99 bytes free, under SVC_MIN_FREE_BYTES (100)`,
      });
      const unreadable = () => {
        throw Object.assign(new Error("EIO: i/o error"), { code: "EIO" });
      };
      expect(readStatus(dir, { minFree: 100, free: unreadable })).toMatchObject({ healthy: false, problem: `the disk of data_dir ${dir} cannot be read: EIO` });
      // 0 turns the check off: the disk is not even read.
      expect(readStatus(dir, { minFree: 0, free: unreadable })).toMatchObject({ healthy: true });
      // The real disk, with a minimum no disk has.
      expect(readStatus(dir, { minFree: Number.MAX_SAFE_INTEGER }).problem).toMatch(new RegExp(`^the disk of data_dir .* has \\d+ bytes free, under SVC_MIN_FREE_BYTES \\(${Number.MAX_SAFE_INTEGER}\\)$`));
      // A runner-host on a full disk stops writing its status: the disk is what to fix.
      write(STATUS_FRESH_MS + 5_000);
      expect(readStatus(dir, { minFree: 100, free: () => 99 }).problem).toMatch(/has 99 bytes free/);
      expect(readStatus(dir, { minFree: 100, free: () => 100 }).problem).toMatch(/^the status is \d+ s old$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
