/**
 * What `svc runner` reads (runner configuration or host configuration, only the runner's
 * variables checked, the region override) and its one-runner-host-per-data_dir lock.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, utimesSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { acquireDataDirLock } from "../../runner-host/cli/data-dir-lock.ts";
import { loadRunnerConfigFile } from "../../runner-host/cli/runner-config-file.ts";
import { procState } from "../../runner-host/proc-state.ts";

const dir = mkdtempSync(path.join(tmpdir(), "svc-runner-config-"));
const write = (name: string, value: unknown) => {
  const file = path.join(dir, name);
  writeFileSync(file, JSON.stringify(value));
  return file;
};
const SECRET = "runner-secret-0123456789abcdef";
const harnesses = { pi: { command: ["node", "h.js"] } };
const tool = { name: "t", description: "d", input_schema: { type: "object" }, url: "https://t.example", tenants: ["a"], token_env: "TOOL_TOKEN" };

describe("the runner configuration", () => {
  it("needs only the runner secret and the tools' tokens, and defaults its region", async () => {
    const file = write("runner.json", { public_url: "https://svc.example", runners: { token_env: "RS" }, harnesses, tools: [tool] });
    const r = await loadRunnerConfigFile(file, { RS: SECRET, TOOL_TOKEN: "tt" });
    expect(r.ok && r.config.region).toBe("default");
    const missing = await loadRunnerConfigFile(file, { RS: "short" });
    expect(missing).toEqual({
      ok: false,
      problems: ["runners.token_env: environment variable RS must hold at least 24 bytes", "tools[0].token_env: environment variable TOOL_TOKEN is not set"],
    });
  });

  it("refuses, as the run would, a plain-http public_url that is not loopback (the secret would travel in clear)", async () => {
    const plain = write("plain.json", { public_url: "http://10.0.0.1:8080", runners: { token_env: "RS" }, harnesses });
    const r = await loadRunnerConfigFile(plain, { RS: SECRET });
    expect(r).toEqual({ ok: false, problems: [expect.stringMatching(/^public_url: the runner secret is sent only over https:\/\/ or wss:\/\//)] });
    const local = write("local.json", { public_url: "http://127.0.0.1:8080", runners: { token_env: "RS" }, harnesses });
    expect((await loadRunnerConfigFile(local, { RS: SECRET })).ok).toBe(true);
  });

  it("refuses what belongs to the Worker: tenant-side fields are unknown fields", async () => {
    const file = write("too-much.json", { runners: { token_env: "RS" }, harnesses, providers: { openai: { api_key_env: "K" } }, credential_keys: null });
    const r = await loadRunnerConfigFile(file, { RS: SECRET });
    expect(r).toEqual({ ok: false, problems: ["providers: unknown field", "credential_keys: unknown field"] });
  });

  it("takes its fields from a host configuration without asking for tenant tokens or provider keys", async () => {
    const file = write("host.json", {
      tokens: [{ token_env: "TENANT_TOKEN", tenant: "a", manage: true }],
      harnesses,
      providers: { openai: { api_key_env: "OPENAI_KEY" } },
      runners: { token_env: "RS", regions: { eu: {} } },
    });
    const r = await loadRunnerConfigFile(file, { RS: SECRET, SVC_RUNNER_REGION: "eu" });
    expect(r.ok && r.from).toBe("host");
    expect(r.ok && r.config.region).toBe("eu");
    expect(await loadRunnerConfigFile(file, { RS: SECRET, SVC_RUNNER_REGION: "EU!" })).toEqual({
      ok: false,
      problems: ["environment variable SVC_RUNNER_REGION: must be 1 to 32 lowercase letters, digits or dashes"],
    });
    // Its regions do not say which one this runner-host serves: the service would refuse it every time.
    const regions = write("host-regions.json", {
      tokens: [{ token_env: "TENANT_TOKEN", tenant: "a", manage: true }],
      harnesses,
      runners: { token_env: "RS", regions: { eu: {}, us: {} } },
    });
    expect(await loadRunnerConfigFile(regions, { RS: SECRET })).toEqual({
      ok: false,
      problems: ["runners.regions: the host configuration lists eu, us; set SVC_RUNNER_REGION to the one this runner-host serves (it is not set)"],
    });
    expect(await loadRunnerConfigFile(regions, { RS: SECRET, SVC_RUNNER_REGION: "asia" })).toEqual({
      ok: false,
      problems: ['runners.regions: the host configuration lists eu, us; set SVC_RUNNER_REGION to the one this runner-host serves (it is "asia")'],
    });
    expect((await loadRunnerConfigFile(regions, { RS: SECRET, SVC_RUNNER_REGION: "us" })).ok).toBe(true);
    const noRunners = write("host-no-runners.json", { tokens: [{ token_env: "T", tenant: "a" }], harnesses });
    expect(await loadRunnerConfigFile(noRunners, {})).toEqual({ ok: false, problems: ["runners: required for svc runner (the secret it dials the service with)"] });
  });
});

describe("one svc process per data_dir", () => {
  const lockDir = () => mkdtempSync(path.join(dir, "lock-"));
  const holder = (d: string, h: { pid: number; host: string }) => writeFileSync(path.join(d, "runner.lock"), JSON.stringify({ ...h, boot: "x" }));

  it("a second runner-host is refused while the first lives, and may start once it released", () => {
    const d = lockDir();
    holder(d, { pid: process.ppid, host: hostname() });
    const second = acquireDataDirLock(d);
    expect(second).toEqual({ ok: false, holder: { pid: process.ppid, host: hostname(), boot: "x" } });
  });

  it("a lock left by a process that is gone is taken over, and released on stop", () => {
    const d = lockDir();
    holder(d, { pid: 2 ** 22 + 12345, host: hostname() });
    const lock = acquireDataDirLock(d);
    expect(lock.ok).toBe(true);
    if (lock.ok) lock.release();
    expect(acquireDataDirLock(d).ok).toBe(true);
  });

  it("a lock whose process was killed and is not reaped yet (a zombie) is taken over at once", async () => {
    // `sleep 0` becomes a zombie: its parent, the exec'd `sleep 5`, never waits for it.
    const parent = spawn("sh", ["-c", "sleep 0 & echo $!; exec sleep 5"], { stdio: ["ignore", "pipe", "ignore"] });
    try {
      const pid = Number((await once(parent.stdout!, "data"))[0].toString().trim());
      await waitUntilZombie(pid);
      const d = lockDir();
      holder(d, { pid, host: hostname() });
      const lock = acquireDataDirLock(d);
      expect(lock.ok).toBe(true);
      if (lock.ok) lock.release();
    } finally {
      parent.kill("SIGKILL");
    }
  });

  it("a lock whose pid lives but is no longer refreshed (the pid reused after a crash or a reboot) is taken over", () => {
    const d = lockDir();
    holder(d, { pid: process.ppid, host: hostname() }); // alive, and not the holder any more
    const old = new Date(Date.now() - 60_000);
    utimesSync(path.join(d, "runner.lock"), old, old);
    const lock = acquireDataDirLock(d);
    expect(lock.ok).toBe(true);
    if (lock.ok) lock.release();
  });

  it("another host's lock counts while it is refreshed, and is stale once it stops being refreshed", () => {
    const d = lockDir();
    holder(d, { pid: 1, host: "another-machine" });
    expect(acquireDataDirLock(d).ok).toBe(false);
    const old = new Date(Date.now() - 60_000);
    utimesSync(path.join(d, "runner.lock"), old, old);
    expect(acquireDataDirLock(d).ok).toBe(true);
  });
});

/** Resolves once `pid` is a zombie (it exits at once; its state shows in /proc a moment later). */
async function waitUntilZombie(pid: number): Promise<void> {
  for (;;) {
    if (procState(pid) === "Z") return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}
