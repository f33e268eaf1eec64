/**
 * Readiness answers 503 while the local stack's disk is short of room for new work, and 200 again
 * once room is freed (docs/api.md "Shutdown and readiness"). A real disk filled by a file: `data_dir`
 * on a small tmpfs where the test may mount one (root, as CI runs), else on the temp directory's
 * disk with the minimum set just below its room; a minimum above every disk's room; and a start
 * refused for a minimum that is not a number of bytes.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freeBytes } from "../../runner-host/cli/disk-room.ts";
import { call } from "../helpers/api.ts";
import { REFERENCE_HARNESS_COMMAND, secret, startStack, type Stack } from "../helpers/stack.ts";
import { runSvc } from "../helpers/svc-command.ts";

const env = { MANAGE: secret("disk-manage"), OPENAI_KEY: "sk-disk-key" };
const config = {
  tokens: [{ token_env: "MANAGE", tenant: "acme", manage: true }],
  harnesses: { pi: { command: REFERENCE_HARNESS_COMMAND } },
  providers: { openai: { api_key_env: "OPENAI_KEY" } },
};
const MiB = 1024 * 1024;
/** The tmpfs data_dir, MiB: room for the objects' first SQLite files with the minimum to spare. */
const DISK_MIB = 96;
/** The minimum free bytes set for the stack on that disk. */
const MIN_FREE = 32 * MiB;
/** The margin of the fallback below, bytes: far above what the other test files write meanwhile. */
const MARGIN = 256 * MiB;

const stacks: Stack[] = [];
const mounts: string[] = [];
afterAll(async () => {
  for (const s of stacks) await s.stop();
  for (const m of mounts) execFileSync("umount", [m]);
});

const ready = async (s: Stack) => {
  const r = await call(s.url, "GET", "/health/ready");
  return { status: r.status, body: r.body };
};

/**
 * A disk for `data_dir` that a test can fill: a tmpfs of its own where this process may mount one
 * (root, as CI runs), else the temp directory's own disk with the minimum set `MARGIN` below its
 * free bytes and a ballast of twice that.
 */
function smallDisk(dir: string): { disk: string; minFree: number; ballast: () => number } {
  const disk = path.join(dir, "disk");
  mkdirSync(disk);
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${DISK_MIB}m`, "tmpfs", disk], { stdio: "ignore" });
    mounts.push(disk);
    return { disk, minFree: MIN_FREE, ballast: () => freeBytes(disk) - MIN_FREE / 2 };
  } catch {
    return { disk, minFree: freeBytes(disk) - MARGIN, ballast: () => 2 * MARGIN };
  }
}

describe("a data_dir on a disk short of room", () => {
  it("readiness answers 503 while the disk is short of room and 200 once room is freed; sessions keep answering", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "svc-disk-"));
    const { disk, minFree: min, ballast } = smallDisk(dir);
    const stack = await startStack({ config, env: { ...env, SVC_MIN_FREE_BYTES: String(min) }, dir, dataDir: disk });
    stacks.push(stack);
    expect(await ready(stack)).toEqual({ status: 200, body: { status: "ready" } });
    const created = await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } });
    expect(created.status).toBe(201);

    // Fill the disk past the minimum: new work would soon fail to be written.
    const mark = stack.mark();
    const file = path.join(disk, "ballast");
    writeFileSync(file, Buffer.alloc(ballast()));
    expect(freeBytes(disk)).toBeLessThan(min);
    expect(await ready(stack)).toEqual({ status: 503, body: { status: "not_ready" } });
    const warn = JSON.parse(await stack.waitForLog(/"msg":"disk short of room/, 10_000, mark));
    expect(warn).toMatchObject({ level: "warn", dir: disk, min_free_bytes: min });
    expect(warn.free_bytes).toBeLessThan(min);
    expect((await call(stack.url, "GET", `/sessions/${created.body.id}`, { token: env.MANAGE })).status).toBe(200);

    rmSync(file);
    expect(await ready(stack)).toEqual({ status: 200, body: { status: "ready" } });
    await stack.waitForLog(/"msg":"disk has room again/, 10_000, mark);
  });
});

describe("the minimum free bytes readiness needs (SVC_MIN_FREE_BYTES)", () => {
  it("above the room of any disk: readiness answers 503 with a runner-host connected", async () => {
    const stack = await startStack({ config, env: { ...env, SVC_MIN_FREE_BYTES: String(Number.MAX_SAFE_INTEGER) } });
    stacks.push(stack);
    expect(await ready(stack)).toEqual({ status: 503, body: { status: "not_ready" } });
    await stack.waitForLog(/"msg":"disk short of room/, 10_000);
    await stack.stop();
  });

  it("not a whole number of bytes: svc exits 1 at start and says why", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "svc-disk-bad-"));
    const configPath = path.join(dir, "config.json");
    writeFileSync(configPath, JSON.stringify({ ...config, listen: "127.0.0.1:0", data_dir: path.join(dir, "data") }));
    const r = await runSvc(["-config", configPath], { env: { ...env, SVC_MIN_FREE_BYTES: "64MiB" } });
    expect(r.code).toBe(1);
    const line = JSON.parse(r.stderr.trim().split("\n").at(-1)!) as { msg: string };
    expect(line.msg).toBe('svc: could not start: SVC_MIN_FREE_BYTES must be a whole number of bytes (0 turns the disk check off), not "64MiB"');
  });
});
