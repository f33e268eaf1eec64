/**
 * `public_url` is a base URL (docs/configuration.md "Fields"): a service served under a path
 * prefix by the operator's reverse proxy. `svc runner` dials `<public_url>/internal/runners/...`
 * below that path (its control socket and session links cross the proxy), and a turn runs on it.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call } from "../helpers/api.ts";
import { startPrefixProxy, type PrefixProxy } from "../helpers/prefix-proxy.ts";
import { startRunner, type RunnerProcess } from "../helpers/runner-process.ts";
import { openSse } from "../helpers/sse.ts";
import { oneTenantConfig, secret, startStack, type Stack } from "../helpers/stack.ts";

const env = { MANAGE: secret("prefix-manage"), OPENAI_KEY: "sk-prefix", RUNNER_SECRET: secret("prefix-runner") };
let provider: ScriptedProvider;
let stack: Stack;
let proxy: PrefixProxy;
let runner: RunnerProcess;

beforeAll(async () => {
  provider = await startScriptedProvider();
  stack = await startStack({ config: { ...oneTenantConfig(provider.url), runners: { token_env: "RUNNER_SECRET" } }, env, runner: false });
  proxy = await startPrefixProxy(stack.url, "/agents");
  const dir = mkdtempSync(path.join(tmpdir(), "svc-prefix-"));
  runner = await startRunner({ dir, config: { public_url: `${proxy.url}/agents/`, runners: { token_env: "RUNNER_SECRET" } }, env: { RUNNER_SECRET: env.RUNNER_SECRET } });
});
afterAll(async () => {
  await runner?.stop();
  await proxy?.close();
  await stack?.stop();
  await provider?.close();
});

describe("public_url under a path prefix", () => {
  it("svc runner dials below the prefix, and a turn runs on it", async () => {
    expect(proxy.seen.filter((p) => p.startsWith("/agents/internal/runners/control?"))).toHaveLength(1);
    // The API calls go straight to the stack: the runner-host's sockets are what crosses the prefix.
    const created = await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } });
    expect(created.status).toBe(201);
    const sse = await openSse(`${stack.url}/sessions/${created.body.id}/events`, { token: env.MANAGE });
    const sent = await call(stack.url, "POST", `/sessions/${created.body.id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "through the prefix" } });
    expect(sent.status).toBe(202);
    const reply = await sse.waitFor((f) => f.event === "assistant.message" && f.json.input_id === sent.body.id, 30_000);
    expect(reply.json.data.text).toBe("echo: through the prefix");
    sse.close();
    expect(proxy.seen.some((p) => p.startsWith("/agents/internal/runners/link?"))).toBe(true);
    expect(proxy.seen.filter((p) => !p.startsWith("/agents/"))).toEqual([]);
  });
});
