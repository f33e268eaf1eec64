/**
 * Tools end to end: the scripted provider asks for tools, the reference harness delegates, the
 * runner-host calls a tool server started here (every error class of docs/api.md "Tools"), the real
 * MCP reference server, and session inspection with its token scope and expiry.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call } from "../helpers/api.ts";
import { freePort, startEverything, type Everything } from "../helpers/mcp-everything.ts";
import { openSse, type SseStream } from "../helpers/sse.ts";
import { secret, sessionProcessPids, startStack, type Stack, REFERENCE_HARNESSES, scriptedProviders } from "../helpers/stack.ts";

const env = { MANAGE: secret("tools-manage"), OTHER: secret("tools-other"), OPENAI_KEY: "sk-tools", TOOL_TOKEN: "tool-bearer-123" };
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

type Seen = { path: string; headers: http.IncomingHttpHeaders; body: any };
const seen: Seen[] = [];
let inspected: {
  during?: { status: number; body: any };
  session?: { status: number; body: any };
  /** While the call is open: another session's events, an interrupt, the session list. */
  elsewhere?: number[];
  token?: string;
  serviceUrl?: string;
  sessionId?: string;
} = {};
/** A session of the same tenant the inspection token must not reach. */
let notInspected = "";
let toolServer: http.Server;
let toolBase = "";
let provider: ScriptedProvider;
let everything: Everything;
let stack: Stack;

async function handleTool(req: http.IncomingMessage, res: http.ServerResponse, body: any): Promise<void> {
  const path = req.url ?? "";
  const result = (r: unknown): void => void res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(r));
  if (path === "/echo") return result({ content: [{ type: "text", text: `echo ${JSON.stringify(body.arguments)}` }], structured_content: { ok: true } });
  if (path === "/progress") {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    for (let i = 1; i <= 3; i++) res.write(`event: progress\ndata: ${JSON.stringify({ step: i })}\n\n`);
    return void res.end(`event: result\ndata: ${JSON.stringify({ content: [{ type: "text", text: "done" }] })}\n\n`);
  }
  if (path === "/slow") return; // never answers: timeouts and interrupts
  if (path.startsWith("/status/")) return void (res.writeHead(Number(path.slice(8))), res.end("no"));
  if (path === "/badjson") return void (res.writeHead(200, { "Content-Type": "application/json" }), res.end("{not json"));
  if (path === "/big") return result({ content: [{ type: "text", text: "x".repeat(500) }] });
  if (path === "/drop") return void (res.writeHead(200, { "Content-Type": "application/json" }), res.write("{"), res.socket?.destroy());
  if (path === "/inspect") {
    const { inspection_token: token, service_url: serviceUrl, session_id: sessionId } = body.scope;
    const r = await call(serviceUrl, "GET", `/sessions/${sessionId}/events`, { token });
    const got = await call(serviceUrl, "GET", `/sessions/${sessionId}`, { token });
    const elsewhere = [
      (await call(serviceUrl, "GET", `/sessions/${notInspected}/events`, { token })).status,
      (await call(serviceUrl, "POST", `/sessions/${sessionId}/events`, { token, body: { type: "user.interrupt" } })).status,
      (await call(serviceUrl, "GET", "/sessions", { token })).status,
    ];
    inspected = { during: { status: r.status, body: r.body }, session: { status: got.status, body: got.body }, elsewhere, token, serviceUrl, sessionId };
    return result({ content: [{ type: "text", text: `saw ${inspected.during!.body.events?.length} events` }] });
  }
  res.writeHead(404).end();
}

const tool = (name: string, path: string, extra: Record<string, unknown> = {}) => ({
  name,
  description: `test tool ${name}`,
  input_schema: { type: "object" },
  url: `${toolBase}${path}`,
  tenants: ["t"],
  ...extra,
});

beforeAll(async () => {
  toolServer = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || "{}");
      seen.push({ path: req.url ?? "", headers: req.headers, body });
      handleTool(req, res, body).catch((e: Error) => (res.headersSent ? res.destroy() : res.writeHead(500).end(e.message)));
    });
  });
  await new Promise<void>((r) => toolServer.listen(0, "127.0.0.1", r));
  toolBase = `http://127.0.0.1:${(toolServer.address() as AddressInfo).port}`;
  [provider, everything] = await Promise.all([startScriptedProvider(), startEverything()]);
  const closed = await freePort("127.0.0.1");
  // public_url is what inspection tools are handed as service_url: the stack's real address.
  const port = await freePort("127.0.0.1");
  const tools = [
    tool("echo", "/echo", { token_env: "TOOL_TOKEN", output_schema: { type: "object" } }),
    tool("progress", "/progress"),
    tool("slow", "/slow", { timeout_seconds: 1 }),
    tool("wait", "/slow"),
    tool("fail5xx", "/status/503"),
    tool("fail4xx", "/status/403"),
    tool("badjson", "/badjson"),
    tool("big", "/big", { max_output_bytes: 100 }),
    tool("drop", "/drop"),
    tool("refused", "/refused", { url: `http://127.0.0.1:${closed}/x` }),
    tool("strict", "/echo", { input_schema: { type: "object", properties: { q: { type: "string" } }, required: ["q"] } }),
    tool("outschema", "/echo", { output_schema: { type: "object", required: ["must"] } }),
    tool("inspector", "/inspect", { inspect_session: true }),
    tool("mcp_echo", "", { url: everything.url, mcp_tool: "echo", input_schema: { type: "object", properties: { message: { type: "string" } } } }),
    tool("mcp_long", "", { url: everything.url, mcp_tool: "trigger-long-running-operation", input_schema: { type: "object" } }),
    tool("hidden", "/echo", { tenants: ["other"] }),
  ];
  stack = await startStack({
    config: {
      listen: `127.0.0.1:${port}`,
      public_url: `http://127.0.0.1:${port}`,
      tokens: [
        { token_env: "MANAGE", tenant: "t", manage: true },
        { token_env: "OTHER", tenant: "other", manage: true },
      ],
      harnesses: REFERENCE_HARNESSES,
      providers: scriptedProviders(provider.url),
      tools,
    },
    env,
  });
  expect(stack.url).toBe(`http://127.0.0.1:${port}`);
});
afterAll(async () => {
  await stack?.stop();
  await Promise.all([provider?.close(), everything?.stop(), new Promise((r) => toolServer?.close(r))]);
});

type S = { id: string; sse: SseStream };
async function session(tools: string[]): Promise<S> {
  const r = await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools } } });
  expect(r.status).toBe(201);
  return { id: r.body.id, sse: await openSse(`${stack.url}/sessions/${r.body.id}/events`, { token: env.MANAGE }) };
}
async function turn(s: S, text: string, headers: Record<string, string> = {}): Promise<string> {
  const r = await call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: { type: "user.message", text }, headers });
  expect(r.status).toBe(202);
  await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status !== "running" && f.json.input_id === r.body.id, 30_000);
  return r.body.id;
}
const resultOf = (s: S, name: string) => {
  const c = s.sse.frames.find((f) => f.event === "tool.call" && f.json.data.name === name)!.json;
  const r = s.sse.frames.find((f) => f.event === "tool.result" && f.json.data.call_id === c.id)!.json;
  return { call: c, result: r.data.result };
};

describe("catalog", () => {
  it("lists the tenant's tools without urls or credentials", async () => {
    const r = await call(stack.url, "GET", "/catalog", { token: env.MANAGE });
    expect(r.body.tools.map((t: { name: string }) => t.name)).not.toContain("hidden");
    expect(r.body.tools.find((t: { name: string }) => t.name === "echo")).toEqual({ name: "echo", description: "test tool echo", input_schema: { type: "object" }, output_schema: { type: "object" } });
    expect(JSON.stringify(r.body)).not.toMatch(/127\.0\.0\.1|TOOL_TOKEN|tool-bearer/);
    expect((await call(stack.url, "GET", "/catalog", { token: env.OTHER })).body.tools.map((t: { name: string }) => t.name)).toEqual(["hidden"]);
  });
});

describe("host HTTP tools", () => {
  it("a JSON tool: bearer from token_env, the turn's traceparent, the wire body; the result goes back to the model", async () => {
    const s = await session(["echo"]);
    const m = await turn(s, '[[tool echo {"q":"hi"}]]', { traceparent: TRACEPARENT });
    const { call: c, result } = resultOf(s, "echo");
    expect(c.input_id).toBe(m);
    expect(result).toEqual({ content: [{ type: "text", text: 'echo {"q":"hi"}' }], structured_content: { ok: true } });
    const req = seen.filter((x) => x.path === "/echo").at(-1)!;
    expect(req.headers.authorization).toBe(`Bearer ${env.TOOL_TOKEN}`);
    expect(req.headers.traceparent).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-0[01]$`));
    expect(req.headers.accept).toBe("application/json, text/event-stream");
    expect(req.body).toEqual({ call_id: c.id, tool: "echo", arguments: { q: "hi" }, scope: { tenant_id: "t", session_id: s.id, call_id: c.id } });
    // The next provider request carries the tool result; the final answer quotes it.
    const final = s.sse.frames.filter((f) => f.event === "assistant.message").at(-1)!.json.data.text;
    expect(final).toBe('tool echo returned: echo {"q":"hi"}');
    s.sse.close();
  });

  it("an SSE tool's progress frames become live tool.progress events, in order, before the result", async () => {
    const s = await session(["progress"]);
    await turn(s, "[[tool progress {}]]");
    const { call: c } = resultOf(s, "progress");
    const prog = s.sse.frames.filter((f) => f.event === "tool.progress");
    expect(prog.map((f) => f.json.data)).toEqual([1, 2, 3].map((step) => ({ call_id: c.id, data: { step } })));
    for (const p of prog) expect(p.id).toBeUndefined();
    const order = s.sse.frames.map((f) => f.event);
    expect(order.indexOf("tool.call")).toBeLessThan(order.indexOf("tool.progress"));
    expect(order.lastIndexOf("tool.progress")).toBeLessThan(order.indexOf("tool.result"));
    s.sse.close();
  });

  const cases: [string, string, boolean, RegExp][] = [
    ["refused connection", "refused", false, /connect|refused/i],
    ["HTTP 4xx", "fail4xx", false, /403/],
    ["HTTP 5xx", "fail5xx", true, /503/],
    ["invalid JSON", "badjson", true, /JSON/i],
    ["output over max_output_bytes", "big", true, /max_output_bytes|bytes/i],
    ["a drop after dispatch", "drop", true, /./],
    ["a timeout", "slow", true, /time/i],
    ["output_schema failure", "outschema", true, /schema|must/i],
  ];
  for (const [what, name, unknown, message] of cases) {
    it(`${what} becomes an error tool.result (unknown_outcome ${unknown}), the text goes back, the turn continues`, async () => {
      const s = await session([name]);
      const m = await turn(s, `[[tool ${name} {}]]`);
      const { result } = resultOf(s, name);
      expect(result.is_error).toBe(true);
      if (unknown) expect(result.unknown_outcome).toBe(true);
      else expect(result.unknown_outcome).toBeUndefined();
      expect(result.content[0].text).toMatch(message);
      const last = s.sse.frames.filter((f) => f.event === "session.status").at(-1)!.json;
      expect(last).toMatchObject({ data: { status: "idle" }, input_id: m });
      expect(s.sse.frames.filter((f) => f.event === "assistant.message").at(-1)!.json.data.text).toContain(`tool ${name} returned`);
      s.sse.close();
    });
  }

  it("input failing input_schema is refused before dispatch: the tool never sees a request", async () => {
    const before = seen.length;
    const s = await session(["strict"]);
    await turn(s, '[[tool strict {"q":5}]]');
    const { result } = resultOf(s, "strict");
    expect(result.is_error).toBe(true);
    expect(result.unknown_outcome).toBeUndefined();
    expect(result.content[0].text).toMatch(/invalid arguments/);
    expect(seen.length).toBe(before);
    s.sse.close();
  });

  it("an interrupt during a slow tool: one tool.result with unknown_outcome, and the next turn after resume is valid for a strict provider", async () => {
    const s = await session(["wait"]);
    const r = await call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "[[tool wait {}]]" } });
    await s.sse.waitFor((f) => f.event === "tool.call");
    await call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: { type: "user.interrupt" } });
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "interrupted");
    const results = s.sse.frames.filter((f) => f.event === "tool.result");
    expect(results).toHaveLength(1);
    expect(results[0]!.json.data.result).toMatchObject({ is_error: true, unknown_outcome: true });
    expect(results[0]!.json.input_id).toBe(r.body.id);
    await call(stack.url, "POST", `/sessions/${s.id}/resume`, { token: env.MANAGE });
    const next = await turn(s, "are you there");
    const last = s.sse.frames.filter((f) => f.event === "session.status").at(-1)!.json;
    expect(last).toMatchObject({ data: { status: "idle" }, input_id: next });
    s.sse.close();
  });

  it("a harness crash mid-call still gives the call exactly one tool.result (unknown_outcome), then failed", async () => {
    const s = await session(["wait"]);
    await call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "[[tool wait {}]]" } });
    await s.sse.waitFor((f) => f.event === "tool.call");
    const pid = sessionProcessPids(stack.stderr()).at(-1)!;
    process.kill(pid, "SIGKILL");
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "failed");
    const results = s.sse.frames.filter((f) => f.event === "tool.result");
    expect(results).toHaveLength(1);
    expect(results[0]!.json.data.result).toMatchObject({ is_error: true, unknown_outcome: true });
    expect(s.sse.frames.find((f) => f.event === "session.error")!.json.data.code).toBe("service_error");
    s.sse.close();
  });
});

describe("MCP tools", () => {
  it("calls the remote MCP tool and records its result", async () => {
    const s = await session(["mcp_echo"]);
    await turn(s, '[[tool mcp_echo {"message":"over mcp"}]]');
    const { result } = resultOf(s, "mcp_echo");
    expect(result.is_error).toBeUndefined();
    expect(result.content[0].text).toContain("over mcp");
    s.sse.close();
  });

  it("MCP progress notifications become tool.progress events", async () => {
    const s = await session(["mcp_long"]);
    await turn(s, '[[tool mcp_long {"duration":1,"steps":3}]]');
    const { call: c, result } = resultOf(s, "mcp_long");
    expect(result.is_error).toBeUndefined();
    const prog = s.sse.frames.filter((f) => f.event === "tool.progress" && f.json.data.call_id === c.id);
    expect(prog.length).toBe(3);
    expect(prog.map((p) => p.json.data.data.progress)).toEqual([1, 2, 3]);
    s.sse.close();
  });
});

describe("session inspection", () => {
  it("the call gets a read-only token and service_url that read this session's events only, until the call ends", async () => {
    const s = await session(["inspector"]);
    const other = await session([]);
    notInspected = other.id;
    await turn(s, "[[tool inspector {}]]");
    const { result } = resultOf(s, "inspector");
    expect(result.is_error).toBeUndefined();
    expect(inspected.sessionId).toBe(s.id);
    expect(inspected.serviceUrl).toBe(stack.url);
    expect(inspected.during!.status).toBe(200);
    expect(inspected.during!.body.events.map((e: { type: string }) => e.type)).toContain("tool.call");
    // Read-only scope of one session: the session itself too.
    expect(inspected.session!.status).toBe(200);
    expect(inspected.session!.body).toMatchObject({ id: s.id, status: "running" });
    const req = seen.filter((x) => x.path === "/inspect").at(-1)!;
    expect(req.body.scope).toMatchObject({ tenant_id: "t", session_id: s.id, call_id: expect.any(String), inspection_token: inspected.token });
    // While the call is open it reaches nothing but its own session's reads...
    expect(inspected.elsewhere).toEqual([403, 403, 403]);
    // ...and after it, nothing at all: 401 everywhere, before any other check (rule 1).
    const token = inspected.token!;
    const after = await call(stack.url, "GET", `/sessions/${s.id}/events`, { token });
    expect(after.status).toBe(401);
    expect(after.body.error.message).toBe("the inspection token's tool call has ended");
    expect((await call(stack.url, "GET", `/sessions/${s.id}`, { token })).status).toBe(401);
    expect((await call(stack.url, "GET", `/sessions/${other.id}/events`, { token })).status).toBe(401);
    expect((await call(stack.url, "POST", `/sessions/${s.id}/events`, { token, body: { type: "user.interrupt" } })).status).toBe(401);
    expect((await call(stack.url, "GET", "/sessions", { token })).status).toBe(401);
    expect((await call(stack.url, "GET", `/sessions/${s.id}/events?limit=0`, { token })).status).toBe(401);
    const forged = `${token.slice(0, -4)}${token.endsWith("AAAA") ? "BBBB" : "AAAA"}`;
    expect((await call(stack.url, "GET", `/sessions/${s.id}/events`, { token: forged })).status).toBe(401);
    s.sse.close();
    other.sse.close();
  });
});
