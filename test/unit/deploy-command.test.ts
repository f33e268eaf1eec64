/**
 * `svc deploy`, `svc secrets` and `svc runner-config` (docs/deploy.md): the host configuration is
 * checked as `-check` does, built into the bundle by `wrangler deploy --dry-run` (offline, the
 * size printed against the platform limit), and the variables a Worker needs are listed, written
 * for `wrangler secret bulk`, or reported missing by name.
 */
import { mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { MAX_CONFIG_BYTES } from "../../src/shared/config-schema.ts";
import { manyTools, runSvc } from "../helpers/svc-command.ts";
import { REFERENCE_HARNESS_COMMAND, secret } from "../helpers/stack.ts";

const env = {
  TOKEN_A: secret("tenant-a"),
  TOKEN_B: secret("tenant-b"),
  PROVIDER_KEY: "sk-provider",
  RUNNER_SECRET: secret("runner"),
};

function hostConfig(over: Record<string, unknown> = {}) {
  return {
    public_url: "https://agents.example.com",
    tokens: [
      { token_env: "TOKEN_A", tenant: "a", manage: true },
      { token_env: "TOKEN_B", tenant: "b", manage: true },
    ],
    harnesses: { pi: { command: REFERENCE_HARNESS_COMMAND } },
    providers: { openai: { api_key_env: "PROVIDER_KEY" } },
    runners: { token_env: "RUNNER_SECRET", regions: { eu: { location_hint: "weur" }, us: { location_hint: "enam" } } },
    ...over,
  };
}

let dir: string;
function write(name: string, value: unknown): string {
  const file = path.join(dir, name);
  writeFileSync(file, typeof value === "string" ? value : JSON.stringify(value));
  return file;
}

/** The built Worker module (wrangler names it after the entry). */
function bundleText(outdir: string): string {
  const js = readdirSync(outdir).filter((f) => f.endsWith(".js"));
  expect(js).toHaveLength(1);
  return readFileSync(path.join(outdir, js[0]!), "utf8");
}

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), "svc-deploy-test-"));
});

describe("svc deploy", () => {
  it("-dry-run builds a host configuration of almost 4 MiB into the bundle and prints the size against the limit", async () => {
    const tools = manyTools(62, 65_000, ["a"]);
    const text = JSON.stringify(hostConfig({ tools }));
    expect(text.length).toBeGreaterThan(MAX_CONFIG_BYTES - 200_000);
    expect(text.length).toBeLessThanOrEqual(MAX_CONFIG_BYTES);
    const file = write("large.json", text);
    const outdir = path.join(dir, "dist-large");
    const r = await runSvc(["deploy", "-config", file, "-dry-run", "-outdir", outdir], { env, timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^bundle: \d+\.\d\d MiB of the 64\.00 MiB Worker size limit \(\d+\.\d %\); gzip \d+\.\d\d MiB, \d+\.\d % of the older 10 MB compressed limit$/m);
    expect(r.stderr).toContain("4 Worker secrets (a Worker may have 128 secrets and variables on Workers Paid, 64 on Free)");
    const bundle = bundleText(outdir);
    expect(bundle).toContain("marker-61 lorem ipsum");
    // No secret value is ever built into the bundle.
    for (const v of Object.values(env)) expect(bundle).not.toContain(v);
  });

  it("stops before wrangler when a variable is missing, naming it (the same check as -check)", async () => {
    const file = write("missing.json", hostConfig());
    const outdir = path.join(dir, "dist-missing");
    const { TOKEN_B: _, ...partial } = env;
    const r = await runSvc(["deploy", "-config", file, "-dry-run", "-outdir", outdir], { env: partial });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${file}: tokens[1].token_env: environment variable TOKEN_B is not set`);
    expect(r.stderr).toContain("svc: not deployed");
    expect(() => statSync(outdir)).toThrow();
  });

  it("-remote-secrets checks the file only: the variables are Worker secrets already", async () => {
    const file = write("remote.json", hostConfig());
    const r = await runSvc(["deploy", "-config", file, "-dry-run", "-remote-secrets", "-outdir", path.join(dir, "dist-remote")], { env: {} });
    expect(r.code, r.stderr).toBe(0);
  });

  it("-token-digests bundles each tenant token's SHA-256 instead of the secret", async () => {
    const file = write("digests.json", hostConfig());
    const outdir = path.join(dir, "dist-digests");
    const r = await runSvc(["deploy", "-config", file, "-dry-run", "-token-digests", "-outdir", outdir], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain("2 Worker secrets");
    const bundle = bundleText(outdir);
    const { createHash } = await import("node:crypto");
    expect(bundle).toContain(createHash("sha256").update(env.TOKEN_A).digest("hex"));
    expect(bundle).not.toContain(env.TOKEN_A);
  });

  it("refuses what only the local stack can run: no runners section, filesystem persistence", async () => {
    const file = write("local-only.json", hostConfig({ runners: null, persistence: { provider: "filesystem", directory: "state" } }));
    const r = await runSvc(["deploy", "-config", file, "-dry-run"], { env });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("runners: required for a deployment");
    expect(r.stderr).toContain("persistence.provider: filesystem exists only in the local stack");
  });

  it("refuses r2 persistence whose bucket is not the one wrangler.toml binds as PERSISTENCE", async () => {
    const r2 = (bucket: string) => ({ provider: "r2", bucket, endpoint: "https://acct.r2.cloudflarestorage.com", access_key_env: "PROVIDER_KEY", secret_key_env: "PROVIDER_KEY" });
    const other = await runSvc(["deploy", "-config", write("r2-other.json", hostConfig({ persistence: r2("sessions-prod") })), "-remote-secrets", "-dry-run"], { env });
    expect(other.code).toBe(1);
    expect(other.stderr).toContain('persistence.bucket: "sessions-prod", but wrangler.toml binds PERSISTENCE to bucket "agent-session-service"');
    expect(other.stderr).toContain("svc: not deployed");
    const same = await runSvc(["deploy", "-config", write("r2-same.json", hostConfig({ persistence: r2("agent-session-service") })), "-remote-secrets", "-dry-run"], { env });
    expect(same.stderr).not.toContain("persistence.bucket");
    expect(same.code).toBe(0);
  });

  it("a wrangler deploy that fails is said to have failed, after wrangler's own message, with its exit code", async () => {
    const r = await runSvc(["deploy", "-config", write("ok.json", hostConfig()), "-dry-run", "--", "--no-such-flag"], { env });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/Unknown arguments[^]*svc: not deployed \(wrangler deploy exited 1; its own message is above\)/);
  });

  it("an invalid file is reported as -check reports it, and bad usage exits 2", async () => {
    const file = write("invalid.json", { ...hostConfig(), surprise: true });
    const r = await runSvc(["deploy", "-config", file, "-dry-run"], { env });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${file}: surprise: unknown field`);
    expect((await runSvc(["deploy", "-dry-run"], { env })).code).toBe(2);
  });
});

describe("svc secrets", () => {
  it("prints every variable the Worker needs, one per line; -token-digests leaves the tenant tokens out", async () => {
    const file = write("secrets.json", hostConfig());
    const all = await runSvc(["secrets", "-config", file], { env: {} });
    expect(all.code).toBe(0);
    expect(all.stdout).toBe("PROVIDER_KEY\nRUNNER_SECRET\nTOKEN_A\nTOKEN_B\n");
    const digests = await runSvc(["secrets", "-config", file, "-token-digests"], { env: {} });
    expect(digests.stdout).toBe("PROVIDER_KEY\nRUNNER_SECRET\n");
  });

  it("-out writes them with their values for `wrangler secret bulk`, readable by the owner only", async () => {
    const file = write("secrets-out.json", hostConfig());
    const out = path.join(dir, "prod.secrets.json");
    const r = await runSvc(["secrets", "-config", file, "-out", out], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(readFileSync(out, "utf8"))).toEqual(env);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(r.stdout + r.stderr).not.toContain(env.TOKEN_A);
  });

  it("-out with -token-digests writes the rest without asking for the tenant tokens", async () => {
    const file = write("secrets-digests.json", hostConfig());
    const out = path.join(dir, "digests.secrets.json");
    const r = await runSvc(["secrets", "-config", file, "-token-digests", "-out", out], { env: { PROVIDER_KEY: env.PROVIDER_KEY, RUNNER_SECRET: env.RUNNER_SECRET } });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(readFileSync(out, "utf8"))).toEqual({ PROVIDER_KEY: env.PROVIDER_KEY, RUNNER_SECRET: env.RUNNER_SECRET });
  });

  it("-out names every missing variable and writes nothing", async () => {
    const file = write("secrets-missing.json", hostConfig());
    const out = path.join(dir, "missing.secrets.json");
    const r = await runSvc(["secrets", "-config", file, "-out", out], { env: { TOKEN_A: env.TOKEN_A } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("tokens[1].token_env: environment variable TOKEN_B is not set");
    expect(r.stderr).toContain("providers.openai.api_key_env: environment variable PROVIDER_KEY is not set");
    expect(r.stderr).toContain("runners.token_env: environment variable RUNNER_SECRET is not set");
    expect(readdirSync(dir)).not.toContain("missing.secrets.json");
  });
});

describe("svc runner-config", () => {
  it("prints the runner configuration of a region: no tenant tokens, no providers", async () => {
    const file = write("for-runner.json", hostConfig());
    const r = await runSvc(["runner-config", "-config", file, "-region", "eu"], { env: {} });
    expect(r.code, r.stderr).toBe(0);
    const runner = JSON.parse(r.stdout);
    expect(Object.keys(runner).sort()).toEqual(["data_dir", "harnesses", "limits", "public_url", "region", "runners", "tools"]);
    expect(runner.region).toBe("eu");
    expect(runner.runners).toEqual({ token_env: "RUNNER_SECRET" });
    const bad = await runSvc(["runner-config", "-config", file, "-region", "apac"], { env: {} });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('-region: "apac" is not one of runners.regions (');
    // With regions listed, leaving -region out is named as such (not as a region "default").
    const none = await runSvc(["runner-config", "-config", file], { env: {} });
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/-region: required, as the host configuration lists runners\.regions \([a-z, -]+\)/);
    expect(none.stdout).toBe("");
  });

  it("without runners.regions, only the default region: another name would be refused by the service every time", async () => {
    const file = write("one-region.json", hostConfig({ runners: { token_env: "RUNNER_SECRET" } }));
    const bad = await runSvc(["runner-config", "-config", file, "-region", "eu"], { env: {} });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('-region: "eu" is not configured (the host configuration has no runners.regions; its one region is "default")');
    expect(bad.stdout).toBe("");
    const fine = await runSvc(["runner-config", "-config", file], { env: {} });
    expect(fine.code, fine.stderr).toBe(0);
    expect(JSON.parse(fine.stdout).region).toBe("default");
  });
});
