/**
 * `svc runner` dials `public_url` with the runner secret as a bearer token: over plain http/ws the
 * secret would cross the network readable, so only https/wss is accepted, except to loopback.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { insecureSecretTarget } from "../../runner-host/socket.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));
const ENV = { SVC_TOKEN: "runner-cli-token-0123456789abcdef", RUNNER_SECRET: "runner-cli-secret-0123456789abcdef" };

/** Runs `svc runner` until it exits by itself, or logs `until` (then it is stopped). */
function svcRunner(publicUrl: string, until?: RegExp): Promise<{ code: number | null; stderr: string }> {
  const dir = mkdtempSync(join(tmpdir(), "svc-runner-cli-"));
  const config = join(dir, "config.json");
  writeFileSync(
    config,
    JSON.stringify({
      public_url: publicUrl,
      data_dir: join(dir, "data"),
      tokens: [{ token_env: "SVC_TOKEN", tenant: "acme", manage: true }],
      harnesses: { pi: { command: ["node", "harness.ts"] } },
      runners: { token_env: "RUNNER_SECRET" },
    }),
  );
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, "cli/svc.mjs"), "runner", "-config", config], { cwd: dir, env: ENV, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => {
      stderr += d;
      if (until?.test(stderr)) child.kill("SIGTERM");
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stderr }));
  });
}

describe("svc runner sends its secret only over https/wss, or to loopback", () => {
  it("refuses a plain http public_url on a non-loopback host with a clear error, before dialling", async () => {
    const r = await svcRunner("http://runner-service.example:8080");
    expect(r.code).toBe(1);
    // Refused with the file's problems, as `-check` refuses it (before anything starts).
    expect(r.stderr).toMatch(/public_url: the runner secret is sent only over https:\/\/ or wss:\/\/ .*runner-service\.example:8080 is not loopback/);
    expect(r.stderr).not.toContain("runner-host started");
    expect(r.stderr).not.toContain(ENV.RUNNER_SECRET);
  });

  it("starts with a loopback http public_url", async () => {
    const r = await svcRunner("http://127.0.0.1:9", /runner-host started/);
    expect(r.stderr).toContain("runner-host started");
    expect(r.stderr).not.toContain("refuses public_url");
  });

  it("the rule: https and wss anywhere, http and ws only to loopback", () => {
    expect(insecureSecretTarget("https://svc.example")).toBeUndefined();
    expect(insecureSecretTarget("wss://svc.example")).toBeUndefined();
    for (const ok of ["http://127.0.0.1:8080", "http://127.1.2.3", "http://localhost:1", "ws://[::1]:80"]) expect(insecureSecretTarget(ok)).toBeUndefined();
    for (const bad of ["http://10.0.0.1", "ws://svc.example", "http://127.0.0.1.example.com", "http://[::2]"]) expect(insecureSecretTarget(bad)).toMatch(/not loopback/);
  });
});
