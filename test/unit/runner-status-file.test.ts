/**
 * The runner-host's status file (runner-host/cli/status-file.ts): a write that fails after start
 * (the data_dir removed, the disk full) is reported once and does not stop the runner-host, whose
 * turns do not depend on the file; the health check then sees a stale or missing status, and a
 * fresh one whose writer died is not healthy either.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readStatus, startStatusFile } from "../../runner-host/cli/status-file.ts";

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
});
