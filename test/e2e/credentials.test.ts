/**
 * Private credential overrides in use (docs/api.md "Credential overrides"): a session's
 * override is what its tool calls carry — as the bearer (string form) or as headers (object form)
 * for a host HTTP tool, for an MCP tool, and for an executor-served tool — and the plaintext
 * reaches nothing else: no log line, no event, no response, no SQLite file on disk.
 */
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call } from "../helpers/api.ts";
import { registerExecutor, sseExecutor, type CallCommand } from "../helpers/executors.ts";
import { startEverything, type Everything } from "../helpers/mcp-everything.ts";
import { openSse } from "../helpers/sse.ts";
import { secret, startStack, type Stack, REFERENCE_HARNESSES, scriptedProviders } from "../helpers/stack.ts";

/** Distinct plaintexts, each findable by a scan of everything the service wrote. */
const PLAIN = {
  bearer: "override-bearer-7f3a9c0e51d24b8b",
  header: "override-header-2c8d4e6f0a1b3c5d",
  mcp: "override-mcp-9e8d7c6b5a4f3e2d",
  executor: "override-executor-1a2b3c4d5e6f7a8b",
  auth: "override-auth-5b7d9f1e3a6c8e0b",
};
const env = {
  MANAGE: secret("cred-manage"),
  OPENAI_KEY: "sk-credentials",
  TOOL_TOKEN: "host-token-from-token-env",
  CRED_KEY: Buffer.alloc(32, 7).toString("base64"),
};

type Seen = { path: string; authorization?: string; apiKey?: string };
const seen: Seen[] = [];
let toolServer: http.Server;
let proxy: http.Server;
let provider: ScriptedProvider;
let everything: Everything;
let stack: Stack;

/** Records the credential headers of each request, then forwards it to server-everything. */
function startMcpProxy(target: string): Promise<string> {
  const t = new URL(target);
  proxy = http.createServer((req, res) => {
    seen.push({ path: "/mcp", authorization: req.headers.authorization });
    const up = http.request({ host: t.hostname, port: t.port, path: req.url, method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on("error", () => res.destroy());
    req.pipe(up);
  });
  return new Promise((resolve) => proxy.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}${t.pathname}`)));
}

beforeAll(async () => {
  toolServer = http.createServer((req, res) => {
    seen.push({ path: req.url ?? "", authorization: req.headers.authorization, apiKey: req.headers["x-api-key"] as string | undefined });
    // `/echo` quotes the Authorization header's credentials without their scheme, as a tool may.
    const text = req.url === "/echo" ? `saw ${req.headers.authorization?.split(" ")[1]}` : "found";
    req.resume().on("end", () => res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ content: [{ type: "text", text }] })));
  });
  await new Promise<void>((r) => toolServer.listen(0, "127.0.0.1", r));
  const toolUrl = `http://127.0.0.1:${(toolServer.address() as AddressInfo).port}/search`;
  [provider, everything] = await Promise.all([startScriptedProvider(), startEverything()]);
  const mcpUrl = await startMcpProxy(everything.url);
  stack = await startStack({
    config: {
      tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
      harnesses: REFERENCE_HARNESSES,
      providers: scriptedProviders(provider.url),
      credential_keys: { active: "k1", keys: { k1: "CRED_KEY" } },
      tools: [
        { name: "search", description: "web search", input_schema: { type: "object" }, url: toolUrl, tenants: ["t"], token_env: "TOOL_TOKEN" },
        { name: "echo_auth", description: "echoes its credentials", input_schema: { type: "object" }, url: toolUrl.replace(/\/search$/, "/echo"), tenants: ["t"] },
        {
          name: "mcp_echo",
          description: "echo over MCP",
          input_schema: { type: "object", properties: { message: { type: "string" } } },
          url: mcpUrl,
          mcp_tool: "echo",
          tenants: ["t"],
          token_env: "TOOL_TOKEN",
        },
      ],
    },
    env,
  });
});
afterAll(async () => {
  await stack?.stop();
  await Promise.all([provider?.close(), everything?.stop(), new Promise((r) => toolServer?.close(r)), new Promise((r) => proxy?.close(r))]);
});

async function runTool(bindings: object[], credentials: object[] | undefined, text: string) {
  const body: Record<string, unknown> = { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [], bindings } };
  if (credentials) body.credentials = credentials;
  const created = await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body });
  expect(created.status, created.text).toBe(201);
  const id = created.body.id as string;
  const sse = await openSse(`${stack.url}/sessions/${id}/events`, { token: env.MANAGE });
  const sent = await call(stack.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text } });
  await sse.waitFor((f) => f.event === "session.status" && f.json.data.status !== "running" && f.json.input_id === sent.body.id, 30_000);
  const result = sse.frames.find((f) => f.event === "tool.result")!.json.data.result;
  const page = await call(stack.url, "GET", `/sessions/${id}/events`, { token: env.MANAGE });
  const got = await call(stack.url, "GET", `/sessions/${id}`, { token: env.MANAGE });
  sse.close();
  return { id, result, wire: sse.frames.map((f) => f.data).join("\n") + page.text + got.text + created.text };
}

const wires: string[] = [];

describe("credential overrides reach the tool call", () => {
  it("host HTTP tool, string form: the override replaces the token_env bearer; a session without one keeps token_env", async () => {
    const r = await runTool([{ alias: "web", provider: "search" }], [{ binding: "web", value: PLAIN.bearer }], "[[tool search {}]]");
    expect(r.result.is_error).toBeUndefined();
    expect(seen.filter((s) => s.path === "/search").at(-1)!.authorization).toBe(`Bearer ${PLAIN.bearer}`);
    wires.push(r.wire);
    const plain = await runTool([{ alias: "web", provider: "search" }], undefined, "[[tool search {}]]");
    expect(plain.result.is_error).toBeUndefined();
    expect(seen.filter((s) => s.path === "/search").at(-1)!.authorization).toBe(`Bearer ${env.TOOL_TOKEN}`);
  });

  it("host HTTP tool, headers form: the headers are sent and the token_env bearer is not", async () => {
    const r = await runTool([{ alias: "web", provider: "search" }], [{ binding: "web", value: { headers: { "X-Api-Key": PLAIN.header } } }], "[[tool search {}]]");
    expect(r.result.is_error).toBeUndefined();
    const last = seen.filter((s) => s.path === "/search").at(-1)!;
    expect(last.apiKey).toBe(PLAIN.header);
    expect(last.authorization).toBeUndefined();
    wires.push(r.wire);
  });

  it("host HTTP tool, headers form: an Authorization header's credentials a tool echoes without their scheme are redacted", async () => {
    const r = await runTool([{ alias: "e", provider: "echo_auth" }], [{ binding: "e", value: { headers: { Authorization: `Bearer ${PLAIN.auth}` } } }], "[[tool echo_auth {}]]");
    expect(seen.filter((s) => s.path === "/echo").at(-1)!.authorization).toBe(`Bearer ${PLAIN.auth}`);
    expect(r.result).toEqual({ content: [{ type: "text", text: "saw [redacted]" }] });
    wires.push(r.wire);
  });

  it("MCP tool: every request of the call carries the override bearer", async () => {
    const before = seen.length;
    const r = await runTool([{ alias: "m", provider: "mcp_echo" }], [{ binding: "m", value: PLAIN.mcp }], '[[tool mcp_echo {"message":"hi"}]]');
    expect(r.result.is_error).toBeUndefined();
    const mcp = seen.slice(before).filter((s) => s.path === "/mcp");
    expect(mcp.length).toBeGreaterThan(0);
    for (const s of mcp) expect(s.authorization).toBe(`Bearer ${PLAIN.mcp}`);
    wires.push(r.wire);
  });

  it("executor-served tool: the call command carries the override in arguments.$credential", async () => {
    const tool = { name: "lookup", description: "d", input_schema: { type: "object" } };
    const reg = await registerExecutor(stack.url, env.MANAGE, { binding: "dict", tools: [tool] });
    const calls: CallCommand[] = [];
    const ex = await sseExecutor(stack.url, reg.body, {
      onCall: (c, x) => {
        calls.push(c);
        void x.reply({ call_id: c.call_id, result: { content: [{ type: "text", text: "ok" }] } });
      },
    });
    const r = await runTool([{ alias: "dict", executor: reg.body.id }], [{ binding: "dict", value: PLAIN.executor }], '[[tool lookup {"w":1}]]');
    expect(r.result.is_error).toBeUndefined();
    expect(calls[0]!.arguments).toEqual({ w: 1, $credential: PLAIN.executor });
    wires.push(r.wire);
    ex.drop();
  });

  it("headers the service sets are refused for an executor's binding that names a host tool too, accepted for an executor's alone", async () => {
    const tool = { name: "lookup2", description: "d", input_schema: { type: "object" } };
    const reg = await registerExecutor(stack.url, env.MANAGE, { binding: "both", tools: [tool] });
    const create = (binding: object) =>
      call(stack.url, "POST", "/sessions", {
        token: env.MANAGE,
        body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [], bindings: [binding] }, credentials: [{ binding: "both", value: { headers: { Host: "evil.example", "X-Sec": "both-secret" } } }] },
      });
    const both = await create({ alias: "both", provider: "search", executor: reg.body.id });
    expect([both.status, both.body.error?.message]).toEqual([400, 'credentials for "both": header "Host" is set by the service, not by a credential']);
    expect((await create({ alias: "both", executor: reg.body.id })).status).toBe(201);
  });

  it("a reload that gives a credential key another value is refused, and overrides stay readable", async () => {
    const before = await runTool([{ alias: "web", provider: "search" }], [{ binding: "web", value: "before-the-reload" }], "[[tool search {}]]");
    writeFileSync(path.join(stack.dir, "config.env"), `CRED_KEY=${Buffer.alloc(32, 9).toString("base64")}\n`);
    const mark = stack.mark();
    stack.child.kill("SIGHUP");
    expect(await stack.waitForLog(/"msg":"reload refused: a credential key changed its value/, 10_000, mark)).toContain('"keys":"k1"');
    rmSync(path.join(stack.dir, "config.env"));
    // The session's override, encrypted before, still reaches its tool.
    const sse = await openSse(`${stack.url}/sessions/${before.id}/events`, { token: env.MANAGE });
    const sent = await call(stack.url, "POST", `/sessions/${before.id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "[[tool search {}]]" } });
    await sse.waitFor((f) => f.event === "session.status" && f.json.data.status !== "running" && f.json.input_id === sent.body.id, 30_000);
    sse.close();
    expect(seen.filter((x) => x.path === "/search").at(-1)!.authorization).toBe("Bearer before-the-reload");
  });

  it("the plaintext is in no log line, event, response or file the service wrote", async () => {
    expect(wires).toHaveLength(5);
    const logs = stack.stderr();
    const files = walk(stack.dir).map((f) => readFileSync(f).toString("latin1"));
    for (const value of Object.values(PLAIN)) {
      for (const w of wires) expect(w).not.toContain(value);
      expect(logs).not.toContain(value);
      for (const f of files) expect(f.includes(value)).toBe(false);
    }
    // The scan does see what it should: the session data is in those files.
    expect(files.some((f) => f.includes("tool.result"))).toBe(true);
  });
});

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}
