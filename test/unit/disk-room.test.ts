/**
 * Readiness in the local stack needs room on its disks (runner-host/cli/disk-room.ts): the
 * LOCAL_DISK service's answer at the threshold's edge, per directory, and its log lines.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_MIN_FREE_BYTES, diskRoomHandler, freeBytes, minFreeFrom } from "../../runner-host/cli/disk-room.ts";
import type { LogFields } from "../../runner-host/log.ts";
import { LOCAL_DISK_ROOM_URL } from "../../src/runtime-constants.ts";

const MIN = 64 * 1024 * 1024;

function rig(free: Record<string, number>, minFree = MIN) {
  const lines: { level: string; msg: string; fields?: LogFields }[] = [];
  const handler = diskRoomHandler(Object.keys(free), minFree, (level, msg, fields) => lines.push({ level, msg, fields }), (dir) => {
    const bytes = free[dir]!;
    if (bytes < 0) throw Object.assign(new Error("EACCES: permission denied"), { code: "EACCES" });
    return bytes;
  });
  const ask = async () => (await (await handler(new Request(LOCAL_DISK_ROOM_URL))).json()) as { ok: boolean };
  return { ask, lines };
}

describe("the local stack's disk room for readiness", () => {
  it("has room at exactly the minimum free bytes, and none one byte below it", async () => {
    expect(await rig({ "/data": MIN }).ask()).toEqual({ ok: true });
    expect(await rig({ "/data": MIN - 1 }).ask()).toEqual({ ok: false });
  });

  it("needs the room in every directory (data_dir and a filesystem persistence directory)", async () => {
    expect(await rig({ "/data": MIN * 10, "/store": MIN - 1 }).ask()).toEqual({ ok: false });
    expect(await rig({ "/data": MIN - 1, "/store": MIN * 10 }).ask()).toEqual({ ok: false });
    expect(await rig({ "/data": MIN, "/store": MIN }).ask()).toEqual({ ok: true });
  });

  it("counts a directory whose disk it cannot read as short of room, and says why", async () => {
    const r = rig({ "/gone": -1 });
    expect(await r.ask()).toEqual({ ok: false });
    expect(r.lines.map((l) => l.fields)).toEqual([{ dir: "/gone", free_bytes: -1, min_free_bytes: MIN, error: "EACCES" }]);
  });

  it("logs a warning once when a disk runs short, and a line when it has room again", async () => {
    const free = { "/data": MIN - 1 };
    const r = rig(free);
    await r.ask();
    await r.ask();
    expect(r.lines).toEqual([
      { level: "warn", msg: "disk short of room: readiness answers 503 until it is freed", fields: { dir: "/data", free_bytes: MIN - 1, min_free_bytes: MIN, error: undefined } },
    ]);
    free["/data"] = MIN;
    expect(await r.ask()).toEqual({ ok: true });
    await r.ask();
    expect(r.lines.slice(1)).toEqual([{ level: "info", msg: "disk has room again: readiness no longer held back", fields: { dir: "/data", free_bytes: MIN } }]);
  });

  it("with a minimum of 0 has room whatever the disk says", async () => {
    expect(await rig({ "/data": 0, "/gone": -1 }, 0).ask()).toEqual({ ok: true });
  });

  it("answers 404 on any other route", async () => {
    const handler = diskRoomHandler([], MIN, () => {});
    expect((await handler(new Request("http://local-disk/other"))).status).toBe(404);
  });

  it("reads a real directory's free bytes, and for one not made yet its nearest parent's disk", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "disk-room-"));
    const bytes = freeBytes(dir);
    expect(Number.isSafeInteger(bytes)).toBe(true);
    expect(bytes).toBeGreaterThan(0);
    const file = path.join(dir, "file");
    writeFileSync(file, "");
    expect(freeBytes(path.join(dir, "store", "not", "made"))).toBeGreaterThan(0);
    expect(() => freeBytes(path.join(file, "under-a-file"))).toThrow(/ENOTDIR/);
  });
});

describe("SVC_MIN_FREE_BYTES", () => {
  it("defaults to 64 MiB when unset or empty", () => {
    expect(DEFAULT_MIN_FREE_BYTES).toBe(64 * 1024 * 1024);
    expect(minFreeFrom({})).toEqual({ ok: true, bytes: DEFAULT_MIN_FREE_BYTES });
    expect(minFreeFrom({ SVC_MIN_FREE_BYTES: "" })).toEqual({ ok: true, bytes: DEFAULT_MIN_FREE_BYTES });
  });

  it("takes whole numbers of bytes from 0 up to the largest safe integer", () => {
    expect(minFreeFrom({ SVC_MIN_FREE_BYTES: "0" })).toEqual({ ok: true, bytes: 0 });
    expect(minFreeFrom({ SVC_MIN_FREE_BYTES: "9007199254740991" })).toEqual({ ok: true, bytes: Number.MAX_SAFE_INTEGER });
  });

  it("refuses anything else with a sentence that names the variable", () => {
    for (const raw of ["-1", "1.5", "64MiB", " 1", "9007199254740992", "1e9", "12345678901234567"]) {
      const r = minFreeFrom({ SVC_MIN_FREE_BYTES: raw });
      expect(r.ok, raw).toBe(false);
      expect(!r.ok && r.problem).toMatch(/^SVC_MIN_FREE_BYTES must be a whole number of bytes \(0 turns the disk check off\), not "/);
    }
  });
});
