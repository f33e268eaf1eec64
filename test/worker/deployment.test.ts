/**
 * The Worker side of a deployment: the host configuration built into the bundle wins over the
 * `HOST_CONFIG` fallback, tokens deployed as digests need no secret, `GET /internal/status` names
 * missing variables (never values), the runner protocol version and region are checked when a
 * runner-host dials, and readiness reuses the isolate's fleet snapshot instead of asking the pools
 * on every probe.
 */
import { createExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app.ts";
import { installBundledConfig } from "../../src/bundled-config.ts";
import type { Env } from "../../src/env.ts";
import { sha256Hex } from "../../src/shared/ids.ts";
import { RUNNER_PROTOCOL } from "../../src/shared/runner-protocol.ts";
import { FLEET_CACHE_MS } from "../../src/runner/fleet.ts";
import { POOL_NAME } from "../../src/runner/pool-name.ts";
import { BASE, env } from "./helpers.ts";

const RUNNER_SECRET = "runner-secret-0123456789abcdef-deploy";
const TOKEN = "deployed-token-0123456789abcdef";
const TOOL_TOKEN = "tool-token-value-0123456789";

function config(over: Record<string, unknown> = {}) {
  return {
    tokens: [{ token_env: "DEPLOY_TOKEN", tenant: "deploy", manage: true }],
    harnesses: { pi: { command: ["node", "harness.js"] } },
    providers: { openai: { api_key_env: "DEPLOY_OPENAI_KEY" } },
    tools: [
      {
        name: "lookup",
        description: "looks things up",
        input_schema: { type: "object" },
        url: "https://tools.example/lookup",
        tenants: ["deploy"],
        token_env: "DEPLOY_TOOL_TOKEN",
      },
    ],
    runners: { token_env: "DEPLOY_RUNNER_SECRET", regions: { eu: { location_hint: "weur" }, us: {} } },
    ...over,
  };
}

function call(e: Record<string, unknown>, path: string, token: string, headers: Record<string, string> = {}): Promise<Response> {
  const req = new Request(`${BASE}${path}`, { headers: { Authorization: `Bearer ${token}`, ...headers } });
  return Promise.resolve(app.fetch(req, { ...env, ...e } as Env, createExecutionContext()));
}

afterEach(() => {
  installBundledConfig(undefined);
  vi.useRealTimers();
});

describe("host configuration built into the bundle", () => {
  it("the bundled configuration wins over HOST_CONFIG, and a token deployed as a digest needs no secret", async () => {
    const text = JSON.stringify(config());
    installBundledConfig({ text, tokenDigests: { DEPLOY_TOKEN: await sha256Hex(TOKEN) } });
    // HOST_CONFIG still holds the test pool's configuration: the bundled text must be the one used.
    const e = { DEPLOY_RUNNER_SECRET: RUNNER_SECRET, DEPLOY_OPENAI_KEY: "sk-deploy", DEPLOY_TOOL_TOKEN: TOOL_TOKEN };
    const catalog = await call(e, "/catalog", TOKEN);
    expect(catalog.status).toBe(200);
    expect(((await catalog.json()) as { tools: { name: string }[] }).tools.map((t) => t.name)).toEqual(["lookup"]);

    const status = await call(e, "/internal/status", RUNNER_SECRET);
    expect(status.status).toBe(200);
    const body = (await status.json()) as { config: { source: string }; missing: string[]; protocol: number; regions: { region: string }[] };
    expect(body.config.source).toBe("bundle");
    expect(body.missing).toEqual([]);
    expect(body.protocol).toBe(RUNNER_PROTOCOL);
    expect(body.regions.map((r) => r.region)).toEqual(["eu", "us"]);
  });

  it("GET /internal/status names each missing variable, never a value, and needs the runner secret", async () => {
    installBundledConfig({ text: JSON.stringify(config({ providers: { openai: { api_key_env: "DEPLOY_OPENAI_KEY_2" } } })), tokenDigests: {} });
    const e = { DEPLOY_RUNNER_SECRET: RUNNER_SECRET, DEPLOY_TOOL_TOKEN: TOOL_TOKEN };
    expect((await call(e, "/internal/status", "not-the-runner-secret-0123456789")).status).toBe(401);
    const status = await call(e, "/internal/status", RUNNER_SECRET);
    const text = await status.text();
    const body = JSON.parse(text) as { missing: string[] };
    expect(body.missing).toEqual([
      "tokens[0].token_env: environment variable DEPLOY_TOKEN is not set",
      "providers.openai.api_key_env: environment variable DEPLOY_OPENAI_KEY_2 is not set",
    ]);
    expect(text).not.toContain(RUNNER_SECRET);
    expect(text).not.toContain(TOOL_TOKEN);
  });
});

describe("runner-host dial-in", () => {
  const e = { DEPLOY_RUNNER_SECRET: RUNNER_SECRET, DEPLOY_TOKEN: TOKEN, DEPLOY_OPENAI_KEY: "k", DEPLOY_TOOL_TOKEN: TOOL_TOKEN };
  const dial = (query: string) => call(e, `/internal/runners/control?${query}`, RUNNER_SECRET, { Upgrade: "websocket" });

  it("refuses a runner-host of another protocol version with 409 and a message naming both", async () => {
    installBundledConfig({ text: JSON.stringify(config()), tokenDigests: {} });
    for (const q of [`protocol=${RUNNER_PROTOCOL - 1}&region=eu`, "region=eu"]) {
      const res = await dial(q);
      expect(res.status).toBe(409);
      const { error } = (await res.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe("conflict");
      expect(error.message).toMatch(new RegExp(`this service speaks ${RUNNER_PROTOCOL}`));
    }
  });

  it("refuses a session link of another protocol version, or of none, with 409: a refused runner-host runs no turn through a link it held", async () => {
    installBundledConfig({ text: JSON.stringify(config()), tokenDigests: {} });
    const link = `session=${"a".repeat(32)}:acme&lease=1&runner=${"c".repeat(32)}`;
    for (const q of [`protocol=${RUNNER_PROTOCOL - 1}&${link}`, link]) {
      const res = await call(e, `/internal/runners/link?${q}`, RUNNER_SECRET, { Upgrade: "websocket" });
      expect(res.status).toBe(409);
      const { error } = (await res.json()) as { error: { code: string; message: string } };
      expect(error).toEqual({
        code: "conflict",
        message: `runner protocol ${q.startsWith("protocol") ? RUNNER_PROTOCOL - 1 : "(none)"} is not supported: this service speaks ${RUNNER_PROTOCOL}; run a runner-host of the same release as the Worker`,
      });
    }
  });

  it("refuses a region the configuration does not list, and accepts a listed one", async () => {
    installBundledConfig({ text: JSON.stringify(config()), tokenDigests: {} });
    const bad = await dial(`protocol=${RUNNER_PROTOCOL}&region=apac`);
    expect(bad.status).toBe(409);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toBe('region "apac" is not configured (runners.regions: eu, us)');
    const ok = await dial(`protocol=${RUNNER_PROTOCOL}&region=eu`);
    expect(ok.status).toBe(101);
    ok.webSocket!.accept();
    ok.webSocket!.close();
  });
});

describe("readiness", () => {
  it("reuses the isolate's fleet snapshot: a runner-host that connects is seen once the snapshot ages", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + FLEET_CACHE_MS + 1);
    const probe = () => call({}, "/health/ready", "");
    expect((await probe()).status).toBe(503);
    const res = await env.RUNNERS.getByName(POOL_NAME).fetch("https://pool/control", { headers: { Upgrade: "websocket" } });
    const ws = res.webSocket!;
    ws.accept();
    const welcome = new Promise<void>((resolve) => ws.addEventListener("message", () => resolve()));
    const capacity = { loaded: 0, loaded_limit: 4, idle: 0 };
    ws.send(JSON.stringify({ t: "hello", protocol: RUNNER_PROTOCOL, runner_id: "c".repeat(32), boot: "d".repeat(32), harnesses: ["pi"], draining: false, capacity }));
    await welcome;
    // Within the period the probe answers from the snapshot, without asking the pool.
    expect((await probe()).status).toBe(503);
    vi.setSystemTime(Date.now() + FLEET_CACHE_MS + 1);
    expect((await probe()).status).toBe(200);
    ws.close();
  });
});
