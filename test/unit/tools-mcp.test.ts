/**
 * Host MCP tool calls against the real @modelcontextprotocol/server-everything (Streamable HTTP,
 * stateful), plus a small raw node:http peer for what that server cannot show: the headers a call
 * carries, and a connection dropped in the middle of `tools/call`.
 */
import http from "node:http";
import net from "node:net";
import { freePort, startEverything, type Everything } from "../helpers/mcp-everything.ts";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { executeHostTool } from "../../runner-host/tools/dispatch.ts";
import { watchedFetch } from "../../runner-host/tools/mcp-fetch.ts";
import { CallBudget } from "../../runner-host/tools/outcome.ts";
import type { HostTool } from "../../src/shared/config-schema.ts";
import type { ToolResult } from "../../src/shared/result-schema.ts";
import type { ToolCallContext } from "../../runner-host/tools/types.ts";

const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

let everything: Everything;
let mcpUrl = "";

beforeAll(async () => {
  everything = await startEverything();
  mcpUrl = everything.url;
});

afterAll(async () => {
  await everything?.stop();
});

function mcpTool(mcp_tool: string, overrides: Partial<HostTool> = {}): HostTool {
  return {
    name: "probe",
    description: "test tool",
    input_schema: { type: "object" },
    output_schema: null,
    url: mcpUrl,
    tenants: ["t1"],
    token_env: "",
    transport: "mcp",
    mcp_tool,
    timeout_seconds: 10,
    max_output_bytes: 1_048_576,
    inspect_session: false,
    ...overrides,
  };
}

function call(tool: HostTool, args: unknown, o: { ctx?: Partial<ToolCallContext>; env?: Record<string, string> } = {}) {
  const progress: unknown[] = [];
  const ctx: ToolCallContext = { signal: new AbortController().signal, onProgress: (d) => progress.push(d), ...o.ctx };
  return { progress, result: executeHostTool(tool, { call_id: "c".repeat(32), tool: tool.name, arguments: args }, ctx, o.env ?? {}) };
}

function expectError(r: ToolResult, unknownOutcome: boolean, text: RegExp) {
  expect(r.is_error).toBe(true);
  if (unknownOutcome) expect(r.unknown_outcome).toBe(true);
  else expect(r).not.toHaveProperty("unknown_outcome");
  expect(r.content[0]).toMatchObject({ type: "text", text: expect.stringMatching(text) });
}

describe("server-everything", () => {
  it("calls echo", async () => {
    expect(await call(mcpTool("echo"), { message: "hello" }).result).toEqual({ content: [{ type: "text", text: "Echo: hello" }] });
  });

  it("calls through the client that ends a silent call only at its timeout_seconds (never the built-in fetch's 300 s)", async () => {
    const builtin = vi.spyOn(globalThis, "fetch");
    try {
      expect(await call(mcpTool("echo", { timeout_seconds: 86_400 }), { message: "long" }).result).toEqual({ content: [{ type: "text", text: "Echo: long" }] });
      expect(builtin).not.toHaveBeenCalled();
    } finally {
      builtin.mockRestore();
    }
  });

  it("calls get-sum", async () => {
    expect(await call(mcpTool("get-sum"), { a: 2, b: 3 }).result).toEqual({ content: [{ type: "text", text: "The sum of 2 and 3 is 5." }] });
  });

  it("maps structuredContent and checks it against the host output_schema", async () => {
    const output_schema = { type: "object", properties: { temperature: { type: "number" } }, required: ["temperature", "conditions"] };
    const r = await call(mcpTool("get-structured-content", { output_schema }), { location: "Chicago" }).result;
    expect(r.structured_content).toEqual({ temperature: 36, conditions: "Light rain / drizzle", humidity: 82 });
    expect(r.is_error).toBeUndefined();

    const strict = { type: "object", properties: { temperature: { type: "string" } } };
    const bad = await call(mcpTool("get-structured-content", { output_schema: strict }), { location: "Chicago" }).result;
    expectError(bad, true, /does not match its output_schema: \/temperature: /);
  });

  it("maps image content to mime_type", async () => {
    const r = await call(mcpTool("get-tiny-image"), {}).result;
    expect(r.content.map((c) => c.type)).toEqual(["text", "image", "text"]);
    expect(r.content[1]).toMatchObject({ type: "image", mime_type: "image/png", data: expect.stringMatching(/^iVBOR/) });
    expect(Object.keys(r.content[1]!).sort()).toEqual(["data", "mime_type", "type"]);
  });

  it("describes resource links and embedded resources as text items", async () => {
    const links = await call(mcpTool("get-resource-links"), { count: 2 }).result;
    expect(links.content.every((c) => c.type === "text")).toBe(true);
    expect(links.content[1]).toMatchObject({ text: expect.stringMatching(/^\[resource link: Blob Resource 1 \S+\]$/) });

    const text = await call(mcpTool("get-resource-reference"), { resourceType: "Text", resourceId: 2 }).result;
    expect(text.content.map((c) => (c.type === "text" ? c.text : c.type))).toContainEqual(
      expect.stringMatching(/^\[resource \S+\]\nResource 2: This is a plaintext resource/),
    );
  });

  it("delivers progress notifications in order", async () => {
    const { progress, result } = call(mcpTool("trigger-long-running-operation"), { duration: 0.25, steps: 5 });
    expect((await result).is_error).toBeUndefined();
    expect(progress).toEqual([1, 2, 3, 4, 5].map((i) => ({ progress: i, total: 5 })));
  });

  it("reports a tool-side error as is_error without unknown_outcome", async () => {
    const r = await call(mcpTool("get-sum"), { a: "two", b: 3 }).result;
    expect(r.is_error).toBe(true);
    expect(r).not.toHaveProperty("unknown_outcome");
  });

  it("counts the tools/call response toward max_output_bytes", async () => {
    expectError(await call(mcpTool("get-tiny-image", { max_output_bytes: 500 }), {}).result, true, /output exceeded max_output_bytes/);
  });

  it("rejects arguments failing the host input_schema before connecting", async () => {
    const input_schema = { type: "object", properties: { message: { type: "string" } }, required: ["message"] };
    expectError(await call(mcpTool("echo", { input_schema }), {}).result, false, /^invalid arguments for tool "probe": \(root\): /);
  });

  it("a connection failure before dispatch has no unknown_outcome", async () => {
    const tool = mcpTool("echo", { url: `http://127.0.0.1:${await freePort("127.0.0.1")}/mcp` });
    expectError(await call(tool, { message: "x" }).result, false, /could not connect to its MCP server/);
  });

  it("a timeout after dispatch has unknown_outcome", async () => {
    const tool = mcpTool("trigger-long-running-operation", { timeout_seconds: 1 });
    const { progress, result } = call(tool, { duration: 30, steps: 300 });
    expectError(await result, true, /timed out after 1 s/);
    expect(progress.length).toBeGreaterThan(0);
  });

  it("an interrupt after dispatch has unknown_outcome", async () => {
    const ac = new AbortController();
    const tool = mcpTool("trigger-long-running-operation");
    // The first progress notification proves the call is running on the server; interrupt then.
    const { result } = call(tool, { duration: 30, steps: 60 }, { ctx: { signal: ac.signal, onProgress: () => ac.abort() } });
    expectError(await result, true, /call was interrupted; its outcome is unknown/);
  });
});

describe("raw MCP peer", () => {
  type Seen = { method: string; path: string; headers: http.IncomingHttpHeaders; rpc?: string };
  const seen: Seen[] = [];
  let peer: http.Server;
  let url = "";
  let onCall: (res: http.ServerResponse, id: unknown) => void = () => {};
  let onDelete = () => {};
  /** The standalone GET stream (and resumes, with `last-event-id`); refused unless a test scripts it. */
  let onGet: (res: http.ServerResponse, headers: http.IncomingHttpHeaders) => void = (res) => void res.writeHead(405).end();
  /** Bytes of `instructions` the initialize answer carries. */
  let initPad = 0;

  beforeAll(async () => {
    // Stateless and JSON-only except tools/call, whose SSE answer each test scripts.
    peer = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const msg = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
        seen.push({ method: req.method!, path: req.url!, headers: req.headers, rpc: msg?.method });
        if (req.method === "DELETE") onDelete();
        if (req.method === "GET") return onGet(res, req.headers);
        if (req.method !== "POST") return void res.writeHead(405).end();
        if (msg.method === "initialize") {
          const result = {
            protocolVersion: msg.params.protocolVersion,
            capabilities: { tools: {} },
            serverInfo: { name: "peer", version: "1" },
            ...(initPad > 0 ? { instructions: "i".repeat(initPad) } : {}),
          };
          return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result }));
        }
        if (msg.method === "tools/call") return onCall(res, msg.id);
        res.writeHead(202).end();
      });
    });
    await new Promise<void>((resolve) => peer.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(peer.address() as net.AddressInfo).port}/mcp`;
  });

  afterAll(async () => {
    peer.closeAllConnections();
    await new Promise((resolve) => peer.close(resolve));
  });

  it("sends the bearer from token_env and traceparent on every request, then ends the session", async () => {
    onCall = (res, id) => {
      const result = { content: [{ type: "text", text: "ok" }] };
      res
        .writeHead(200, { "content-type": "application/json", "mcp-session-id": "sess-1" })
        .end(JSON.stringify({ jsonrpc: "2.0", id, result }));
    };
    const deleted = new Promise<void>((resolve) => (onDelete = resolve));
    seen.length = 0;
    const tool = mcpTool("remote_name", { url, token_env: "MCP_TOKEN" });
    const r = await call(tool, {}, { env: { MCP_TOKEN: "mcp-secret" }, ctx: { traceparent: TRACEPARENT } }).result;
    expect(r).toEqual({ content: [{ type: "text", text: "ok" }] });
    const posts = seen.filter((s) => s.method === "POST");
    expect(posts.map((s) => s.rpc)).toEqual(["initialize", "notifications/initialized", "tools/call"]);
    for (const s of posts) expect(s.headers).toMatchObject({ authorization: "Bearer mcp-secret", traceparent: TRACEPARENT });
    // The closing DELETE runs after the result is returned; the test timeout bounds this wait.
    await deleted;
    expect(seen.at(-1)!.headers["mcp-session-id"]).toBe("sess-1");
  });

  it("a missing credential fails before connecting", async () => {
    seen.length = 0;
    expectError(await call(mcpTool("x", { url, token_env: "MCP_TOKEN" }), {}).result, false, /is missing its credential/);
    expect(seen).toHaveLength(0);
  });

  it("an answer that is not UTF-8, or gives a member twice, is not recorded as sent: an error with unknown_outcome (JSON and event stream)", async () => {
    const head = (id: unknown) => `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"content":[{"type":"text","text":`;
    onCall = (res, id) => res.writeHead(200, { "content-type": "application/json" }).end(Buffer.concat([Buffer.from(`${head(id)}"bad `), Buffer.from([0xff, 0xfe]), Buffer.from(` end"}]}}`)]));
    expectError(await call(mcpTool("x", { url }), {}).result, true, /MCP server sent a response that is not UTF-8$/);
    onCall = (res, id) => res.writeHead(200, { "content-type": "application/json" }).end(`${head(id)}"first","text":"second"}]}}`);
    expectError(await call(mcpTool("x", { url }), {}).result, true, /MCP server sent JSON that gives result\.content\[0\]\.text more than once$/);
    onCall = (res, id) => res.writeHead(200, { "content-type": "text/event-stream" }).end(`event: message\ndata: ${head(id)}"first","text":"second"}]}}\n\n`);
    expectError(await call(mcpTool("x", { url }), {}).result, true, /MCP server sent JSON that gives result\.content\[0\]\.text more than once$/);
  });

  it("an initialize answer over its bound (1 MiB, outside max_output_bytes) fails the call before it is sent; one under it connects", async () => {
    onCall = (res, id) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: "ok" }] } }));
    try {
      // Its envelope is under 200 bytes: a little under the bound connects, one byte of padding past it does not.
      initPad = 1024 * 1024 - 200;
      expect(await call(mcpTool("x", { url }), {}).result).toEqual({ content: [{ type: "text", text: "ok" }] });
      initPad = 1024 * 1024 + 1;
      expectError(await call(mcpTool("x", { url }), {}).result, false, /MCP server sent an initialize answer over 1048576 bytes$/);
    } finally {
      initPad = 0;
    }
  });

  it("an error answer's body counts toward max_output_bytes too (the SDK would read all of it)", async () => {
    onCall = (res) => void res.writeHead(500, { "content-type": "text/plain" }).end("x".repeat(2_000_000));
    expectError(await call(mcpTool("x", { url, max_output_bytes: 1000 }), {}).result, true, /output exceeded max_output_bytes \(1000\)$/);
  });

  it("a resume of the call's event stream that the server refuses ends the call at once, not at its timeout", async () => {
    onCall = (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`id: e0\nevent: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: 1, progress: 1 } })}\n\n`);
    };
    onGet = (res, headers) => void res.writeHead(headers["last-event-id"] ? 404 : 405).end();
    try {
      expectError(await call(mcpTool("x", { url, timeout_seconds: 60 }), {}).result, true, /response ended without its result$/);
    } finally {
      onGet = (res) => void res.writeHead(405).end();
    }
  });

  it("a redirect is not followed: its answer reaches the SDK without Location (its GET streams would follow a same-origin one)", async () => {
    onGet = (res) => void res.writeHead(307, { location: "/elsewhere" }).end();
    seen.length = 0;
    const budget = new CallBudget(10, new AbortController().signal);
    try {
      const res = await watchedFetch(mcpTool("x", { url }), budget, {})(url, { method: "GET", headers: { accept: "text/event-stream" } });
      expect([res.status, res.headers.get("location")]).toEqual([307, null]);
      expect(seen.map((s) => s.path)).toEqual(["/mcp"]);
    } finally {
      budget.dispose();
      onGet = (res) => void res.writeHead(405).end();
    }
  });

  it("a drop in the middle of tools/call is reported at once with unknown_outcome", async () => {
    onCall = (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: 1, progress: 1 } })}\n\n`, () =>
        res.socket!.destroy(),
      );
    };
    const started = Date.now();
    expectError(await call(mcpTool("x", { url, timeout_seconds: 30 }), {}).result, true, /connection dropped before the result arrived/);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("an error message quoting the call's credential is redacted before it is cut, wherever the cut falls", async () => {
    const secret = "mcp-SECRET-kk42-1122334455";
    const override = "override-SECRET-abc-998877";
    for (const [o, value] of [[{ env: { MCP_TOKEN: secret } }, secret], [{ env: { MCP_TOKEN: secret }, ctx: { bearer: override } }, override]] as const) {
      for (const pad of [0, 150, 166, 175, 185, 195]) {
        onCall = (res, id) => {
          const error = { code: -32603, message: `${"p".repeat(pad)}Bearer ${value} and again ${value}` };
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id, error }));
        };
        const r = await call(mcpTool("x", { url, token_env: "MCP_TOKEN" }), {}, o).result;
        expectError(r, true, /MCP server answered with an error: p*/);
        const text = (r.content[0] as { text: string }).text;
        // No run of the secret longer than a few characters survives, also cut off at the end.
        for (let n = 5; n <= value.length; n++) expect(text, `pad ${pad}`).not.toContain(value.slice(0, n));
        expect(Buffer.byteLength(text.slice(text.indexOf(": ") + 2))).toBeLessThanOrEqual(200);
      }
    }
  });

  it("InvalidParams is a refusal before the tool ran, except the SDK's checks of a result (the tool did run): those have unknown_outcome", async () => {
    const answer = (message: string) => (onCall = (res, id) => {
      const error = { code: -32602, message };
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id, error }));
    });
    answer("Tool x not found");
    expectError(await call(mcpTool("x", { url }), {}).result, false, /MCP server answered with an error: Tool x not found$/);
    answer("Input validation error: Invalid arguments for tool x: bad");
    expectError(await call(mcpTool("x", { url }), {}).result, false, /Input validation error/);
    // The SDK's own wording after the handler ran, with its pretty-printed issues on one line.
    answer('Invalid tools/call result: [\n  {\n    "code": "custom",\n    "path": [\n      "content"\n    ]\n  }\n]');
    expectError(await call(mcpTool("x", { url }), {}).result, true, /: Invalid tools\/call result: \[ \{ "code": "custom", "path": \[ "content" \] \} \]$/);
    answer("Output validation error: Tool x has an output schema but no structured content was provided");
    expectError(await call(mcpTool("x", { url }), {}).result, true, /Output validation error/);
    // As an SDK server sends it: its error's message already starts with the code, and the client
    // adds it once more.
    answer("MCP error -32602: Invalid tools/call result: bad");
    expectError(await call(mcpTool("x", { url }), {}).result, true, /MCP server answered with an error: Invalid tools\/call result: bad$/);
    answer("MCP error -32602: Tool x not found");
    expectError(await call(mcpTool("x", { url }), {}).result, false, /MCP server answered with an error: Tool x not found$/);
  });

  it("the high-level SDK server's output check, sent as an isError result, has unknown_outcome; another isError result does not", async () => {
    const result = (text: string) => (onCall = (res, id) => {
      const body = { jsonrpc: "2.0", id, result: { content: [{ type: "text", text }], isError: true } };
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    });
    result("MCP error -32602: Output validation error: Tool x has an output schema but no structured content was provided");
    expect(await call(mcpTool("x", { url }), {}).result).toMatchObject({ is_error: true, unknown_outcome: true });
    result("no such city");
    expect(await call(mcpTool("x", { url }), {}).result).toEqual({ content: [{ type: "text", text: "no such city" }], is_error: true });
  });

  it("an image result is held to base64 data and a media type, like a host tool's", async () => {
    for (const [image, problem] of [
      [{ type: "image", data: "QQ", mimeType: "image/png" }, /content\[0\]\.data: not base64/],
      [{ type: "image", data: "QUJD", mimeType: "garbage" }, /content\[0\]\.mime_type: not a media type/],
    ] as const) {
      onCall = (res, id) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id, result: { content: [image] } }));
      expectError(await call(mcpTool("x", { url }), {}).result, true, problem);
    }
  });

  it("a result with a lone surrogate is not recorded as sent: an error with unknown_outcome", async () => {
    onCall = (res, id) => {
      const body = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"content":[{"type":"text","text":"a\\ud800b"}]}}`;
      res.writeHead(200, { "content-type": "application/json" }).end(body);
    };
    expectError(await call(mcpTool("x", { url }), {}).result, true, /MCP server sent JSON that cannot be recorded as sent \(result\.content\[0\]\.text: text is not valid Unicode/);
  });

  it("a 5xx on tools/call has unknown_outcome; a 4xx does not", async () => {
    onCall = (res) => void res.writeHead(502).end();
    expectError(await call(mcpTool("x", { url }), {}).result, true, /MCP server returned HTTP 502/);
    onCall = (res) => void res.writeHead(404).end();
    expectError(await call(mcpTool("x", { url }), {}).result, false, /MCP server returned HTTP 404/);
  });

  it("a redirect is the server's answer: not followed, the call sent once, an error without unknown_outcome", async () => {
    seen.length = 0;
    onCall = (res) => void res.writeHead(307, { location: `${url}/elsewhere` }).end();
    expectError(await call(mcpTool("x", { url }), {}).result, false, /MCP server returned HTTP 307/);
    expect(seen.filter((r) => r.rpc === "tools/call")).toHaveLength(1);
  });

  it.each([
    ["an event stream that closes after progress, without the result", (res: http.ServerResponse) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: 1, progress: 1 } })}\n\n`);
    }],
    ["an event stream whose result is no JSON", (res: http.ServerResponse) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end("event: message\ndata: {not json\n\n");
    }],
    ["a JSON answer to another request id", (res: http.ServerResponse) => {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: 999999, result: { content: [] } }));
    }],
  ])("%s fails the call at once, with unknown_outcome (not at the timeout)", async (_what, answer) => {
    onCall = answer;
    const started = Date.now();
    expectError(await call(mcpTool("x", { url, timeout_seconds: 30 }), {}).result, true, /response ended without its result/);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("progress on the standalone GET stream counts toward max_output_bytes too", async () => {
    const progress = (i: number) => `event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: 0, progress: i, message: "x".repeat(200) } })}\n\n`;
    onGet = (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (let i = 0; i < 40; i++) res.write(progress(i));
    };
    // The call is never answered: the flood alone must end it (uncounted, it would time out).
    onCall = () => {};
    try {
      expectError(await call(mcpTool("x", { url, max_output_bytes: 3000, timeout_seconds: 8 }), {}).result, true, /output exceeded max_output_bytes/);
    } finally {
      onGet = (res) => void res.writeHead(405).end();
    }
  });
});
