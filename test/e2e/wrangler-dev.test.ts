/**
 * The bundle `svc deploy` builds, served as Cloudflare would run it: `svc deploy -dry-run -outdir`
 * builds the Worker with a host configuration far past a variable's 5 KB, `wrangler dev --local
 * --no-bundle` serves exactly that output in workerd (offline), and a separate `svc runner` with a
 * runner-only configuration (the runner secret, nothing of tenants or providers) completes turns,
 * survives its own restart, and the Worker names the one secret it was not given.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { wranglerCommand, WRANGLER_TOML } from "../../runner-host/cli/deploy/deploy-command.ts";
import { call } from "../helpers/api.ts";
import { spawnLogged, type Logged } from "../helpers/process.ts";
import { startRunner, type RunnerProcess } from "../helpers/runner-process.ts";
import { openSse } from "../helpers/sse.ts";
import { REFERENCE_HARNESS_COMMAND, ROOT, secret } from "../helpers/stack.ts";
import { manyTools, runSvc } from "../helpers/svc-command.ts";

const secrets = { MANAGE: secret("wd-manage"), OPENAI_KEY: "sk-wrangler-dev", RUNNER_SECRET: secret("wd-runner") };

let provider: ScriptedProvider;
let dir: string;
let dev: Logged;
let url: string;
let runner: RunnerProcess;

beforeAll(async () => {
  provider = await startScriptedProvider();
  dir = mkdtempSync(path.join(tmpdir(), "svc-wrangler-dev-"));
  const config = {
    public_url: "https://agents.example.com",
    tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
    harnesses: { pi: { command: REFERENCE_HARNESS_COMMAND } },
    providers: {
      openai: { api_key_env: "OPENAI_KEY", base_url: provider.url, api: "openai-completions" },
      spare: { api_key_env: "SPARE_KEY" },
    },
    // ~1.2 MB of tool descriptions: far more than a Workers variable or secret could hold.
    tools: manyTools(20, 60_000, ["t"]),
    runners: { token_env: "RUNNER_SECRET" },
  };
  const configPath = path.join(dir, "prod.json");
  writeFileSync(configPath, JSON.stringify(config));
  const outdir = path.join(dir, "dist");
  // The secrets live in Cloudflare (-remote-secrets); locally they are the dev vars file below.
  const built = await runSvc(["deploy", "-config", configPath, "-dry-run", "-remote-secrets", "-outdir", outdir], { env: {}, timeoutMs: 60_000 });
  expect(built.code, built.stderr).toBe(0);

  // Every secret but SPARE_KEY: the Worker must name it.
  const devVars = path.join(dir, ".dev.vars");
  writeFileSync(devVars, Object.entries(secrets).map(([k, v]) => `${k}=${v}\n`).join(""));
  const [cmd, args] = wranglerCommand([
    "dev", path.join(outdir, "deploy-entry.js"), "--no-bundle", "--config", WRANGLER_TOML, "--local",
    "--ip", "127.0.0.1", "--port", "0", "--inspector-port", "0", "--persist-to", path.join(dir, "state"),
    "--env-file", devVars, "--show-interactive-dev-session=false",
  ]);
  dev = spawnLogged(cmd, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: dir, ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}), WRANGLER_SEND_METRICS: "false", CI: "1" },
    detached: true,
  });
  url = /Ready on (http:\/\/\S+)/.exec(await dev.waitFor(/Ready on http:\/\//, 60_000))![1]!;

  runner = await startRunner({
    dir: path.join(dir, "runner"),
    config: { public_url: url, runners: { token_env: "RUNNER_SECRET" } },
    env: { RUNNER_SECRET: secrets.RUNNER_SECRET },
  });
}, 120_000);

afterAll(async () => {
  await runner?.stop();
  if (dev?.child.pid) {
    try {
      process.kill(-dev.child.pid, "SIGTERM");
    } catch {
      // already gone
    }
    await dev.exited;
  }
  await provider?.close();
});

async function turn(id: string, text: string): Promise<string> {
  const sse = await openSse(`${url}/sessions/${id}/events`, { token: secrets.MANAGE });
  const r = await call(url, "POST", `/sessions/${id}/events`, { token: secrets.MANAGE, body: { type: "user.message", text } });
  expect(r.status).toBe(202);
  const reply = await sse.waitFor((f) => f.event === "assistant.message" && f.json.input_id === r.body.id, 30_000);
  await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === r.body.id, 30_000);
  sse.close();
  return reply.json.data.text;
}

describe("the wrangler-built bundle under wrangler dev, with a separate runner-host", () => {
  let id: string;

  it("serves the bundled host configuration (1.2 MB of tools) and completes a turn", async () => {
    const catalog = await call(url, "GET", "/catalog", { token: secrets.MANAGE });
    expect(catalog.status).toBe(200);
    expect(catalog.body.tools).toHaveLength(20);
    expect((await call(url, "GET", "/health/ready")).status).toBe(200);
    const created = await call(url, "POST", "/sessions", { token: secrets.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } });
    expect(created.status).toBe(201);
    id = created.body.id;
    expect(await turn(id, "hello worker")).toBe("echo: hello worker");
  });

  it("the session goes on after the runner-host restarts", async () => {
    const stopped = await runner.stop("SIGTERM");
    expect(stopped.code).toBe(0);
    runner = await startRunner({
      dir: runner.dir,
      config: { public_url: url, runners: { token_env: "RUNNER_SECRET" } },
      env: { RUNNER_SECRET: secrets.RUNNER_SECRET },
    });
    expect(await turn(id, "after the restart")).toBe("echo: after the restart");
  });

  it("GET /internal/status names the secret the Worker was not given, by name only", async () => {
    const r = await call(url, "GET", "/internal/status", { token: secrets.RUNNER_SECRET });
    expect(r.status).toBe(200);
    expect(r.body.config).toEqual({ source: "bundle" });
    expect(r.body.missing).toEqual(["providers.spare.api_key_env: environment variable SPARE_KEY is not set"]);
    for (const v of Object.values(secrets)) expect(r.text).not.toContain(v);
  });
});
