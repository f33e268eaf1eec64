/**
 * Host HTTP/SSE tool calls against a real node:http tool server on 127.0.0.1:0, one path per
 * test. Covers every class of tool error with the unknown_outcome of the table in docs/api.md
 * "Tools", and the request the tool receives.
 */
import http from "node:http";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { executeHostTool } from "../../runner-host/tools/dispatch.ts";
import { TOOL_CLIENT_SILENCE_MS } from "../../runner-host/tools/tool-fetch.ts";
import { TOOL_TIMEOUT_SECONDS } from "../../src/shared/config-tools.ts";
import type { HostTool } from "../../src/shared/config-schema.ts";
import type { ToolResult } from "../../src/shared/result-schema.ts";
import type { ToolCallContext, ToolCallRequest } from "../../runner-host/tools/types.ts";

type Seen = { method: string; headers: http.IncomingHttpHeaders; body: string };
type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void;

const routes = new Map<string, Handler>();
const seen = new Map<string, Seen[]>();
let server: http.Server;
let base = "";

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const path = req.url ?? "/";
      seen.set(path, [...(seen.get(path) ?? []), { method: req.method ?? "", headers: req.headers, body }]);
      const handler = routes.get(path);
      if (handler) handler(req, res, body);
      else res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

let n = 0;
/** A fresh route for one test; returns the tool pointing at it. */
function route(handler: Handler, overrides: Partial<HostTool> = {}): HostTool {
  const path = `/tool-${++n}`;
  routes.set(path, handler);
  return hostTool({ url: `${base}${path}`, ...overrides });
}

function requestsTo(tool: HostTool): Seen[] {
  return seen.get(new URL(tool.url).pathname) ?? [];
}

function hostTool(overrides: Partial<HostTool>): HostTool {
  return {
    name: "probe",
    description: "test tool",
    input_schema: { type: "object", properties: { q: { type: "string" } }, additionalProperties: false },
    output_schema: null,
    url: `${base}/unused`,
    tenants: ["t1"],
    token_env: "",
    transport: "http",
    mcp_tool: "",
    timeout_seconds: 10,
    max_output_bytes: 1_048_576,
    inspect_session: false,
    ...overrides,
  };
}

const json = (res: http.ServerResponse, status: number, value: unknown) =>
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));

const OK: ToolResult = { content: [{ type: "text", text: "done" }] };
const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

function call(tool: HostTool, o: { args?: unknown; ctx?: Partial<ToolCallContext>; env?: Record<string, string>; req?: Partial<ToolCallRequest>; secrets?: string[] } = {}) {
  const progress: unknown[] = [];
  const ctx: ToolCallContext = { signal: new AbortController().signal, onProgress: (d) => progress.push(d), ...o.ctx };
  const req: ToolCallRequest = { call_id: "c".repeat(32), tool: tool.name, arguments: o.args ?? { q: "x" }, ...o.req };
  return { progress, result: executeHostTool(tool, req, ctx, o.env ?? {}, o.secrets) };
}

function expectError(r: ToolResult, unknownOutcome: boolean, text: RegExp) {
  expect(r.is_error).toBe(true);
  if (unknownOutcome) expect(r.unknown_outcome).toBe(true);
  else expect(r).not.toHaveProperty("unknown_outcome");
  expect(r.content).toHaveLength(1);
  expect(r.content[0]).toMatchObject({ type: "text", text: expect.stringMatching(text) });
}

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe("request", () => {
  it("POSTs call_id, tool, arguments and scope with bearer, traceparent, Accept and Content-Type", async () => {
    const tool = route((_q, res) => json(res, 200, OK), { token_env: "PROBE_TOKEN", inspect_session: true });
    const scope = { tenant_id: "t1", session_id: "s".repeat(32), call_id: "c".repeat(32), service_url: "http://svc", inspection_token: "itok" };
    const { result } = call(tool, { env: { PROBE_TOKEN: "secret-token" }, ctx: { traceparent: TRACEPARENT }, req: { scope } });
    expect(await result).toEqual(OK);
    const [got] = requestsTo(tool);
    expect(got!.method).toBe("POST");
    expect(got!.headers).toMatchObject({
      authorization: "Bearer secret-token",
      traceparent: TRACEPARENT,
      accept: "application/json, text/event-stream",
      "content-type": "application/json",
    });
    expect(JSON.parse(got!.body)).toEqual({ call_id: "c".repeat(32), tool: "probe", arguments: { q: "x" }, scope });
  });

  it("is sent by a client that ends a silent call only at its timeout_seconds, up to the longest (never the built-in fetch's 300 s)", async () => {
    const builtin = vi.spyOn(globalThis, "fetch");
    try {
      const tool = route((_q, res) => json(res, 200, OK), { timeout_seconds: TOOL_TIMEOUT_SECONDS.max });
      expect(await call(tool).result).toEqual(OK);
      expect(builtin).not.toHaveBeenCalled();
      expect(TOOL_CLIENT_SILENCE_MS).toBeGreaterThan(TOOL_TIMEOUT_SECONDS.max * 1000);
    } finally {
      builtin.mockRestore();
    }
  });

  it("sends no Authorization without token_env, omits scope when absent and drops a malformed traceparent", async () => {
    const tool = route((_q, res) => json(res, 200, OK));
    expect(await call(tool, { ctx: { traceparent: "not-a-traceparent" } }).result).toEqual(OK);
    const [got] = requestsTo(tool);
    expect(got!.headers.authorization).toBeUndefined();
    expect(got!.headers.traceparent).toBeUndefined();
    expect(Object.keys(JSON.parse(got!.body))).toEqual(["call_id", "tool", "arguments"]);
  });

  it("keeps service_url and inspection_token from tools without inspect_session", async () => {
    const tool = route((_q, res) => json(res, 200, OK));
    const scope = { tenant_id: "t1", session_id: "s".repeat(32), call_id: "c".repeat(32), service_url: "http://svc", inspection_token: "itok" };
    await call(tool, { req: { scope } }).result;
    expect(JSON.parse(requestsTo(tool)[0]!.body).scope).toEqual({ tenant_id: "t1", session_id: "s".repeat(32), call_id: "c".repeat(32) });
  });

  it("lets a credential override replace the token_env bearer", async () => {
    const tool = route((_q, res) => json(res, 200, OK), { token_env: "UNSET_TOKEN" });
    await call(tool, { ctx: { bearer: "override" } }).result;
    await call(tool, { ctx: { headers: { "x-api-key": "k1" } } }).result;
    const [a, b] = requestsTo(tool);
    expect(a!.headers.authorization).toBe("Bearer override");
    expect(b!.headers["x-api-key"]).toBe("k1");
    expect(b!.headers.authorization).toBeUndefined();
  });
});

describe("failures before the tool receives the request: unknown_outcome absent", () => {
  it("schema error: the server sees no request", async () => {
    const tool = route((_q, res) => json(res, 200, OK));
    expectError(await call(tool, { args: { q: 5 } }).result, false, /^invalid arguments for tool "probe": \/q: /);
    expectError(await call(tool, { args: { zz: "x" } }).result, false, /unexpected property "zz"/);
    expect(requestsTo(tool)).toHaveLength(0);
  });

  it("missing credential: token_env unset at call time, and the message names no secret", async () => {
    const tool = route((_q, res) => json(res, 200, OK), { token_env: "PROBE_TOKEN" });
    expectError(await call(tool, { env: { PROBE_TOKEN: "" } }).result, false, /^tool "probe" is missing its credential$/);
    expect(requestsTo(tool)).toHaveLength(0);
  });

  it("a stored credential header the HTTP client owns (create refuses it now): not sent; one the service sets is left out", async () => {
    const tool = route((_q, res) => json(res, 200, OK));
    expectError(await call(tool, { ctx: { headers: { "Content-Length": "1" } } }).result, false, /^tool "probe" has a credential it cannot send: header "Content-Length" is set by the service/);
    expect(requestsTo(tool)).toHaveLength(0);
    expect((await call(tool, { ctx: { headers: { "Content-Type": "text/plain", "X-Key": "k1" } } }).result).is_error).toBeUndefined();
    expect(requestsTo(tool)[0]!.headers).toMatchObject({ "content-type": "application/json", "x-key": "k1" });
  });

  it("a stored override value that would not reach the tool as given (create refuses it now) is not sent", async () => {
    const tool = route((_q, res) => json(res, 200, OK));
    const rule = "visible ASCII, with spaces or tabs only inside it";
    expectError(await call(tool, { ctx: { bearer: "SECRETVAL1 " } }).result, false, new RegExp(`^tool "probe" has a credential it cannot send: its value is not ${rule}$`));
    expectError(await call(tool, { ctx: { headers: { "X-Api-Key": "s\u00e9cret" } } }).result, false, new RegExp(`^tool "probe" has a credential it cannot send: header "X-Api-Key" has a value that is not ${rule}$`));
    expect(requestsTo(tool)).toHaveLength(0);
    expect((await call(tool, { ctx: { bearer: "inner space ok" } }).result).is_error).toBeUndefined();
    expect(requestsTo(tool)[0]!.headers.authorization).toBe("Bearer inner space ok");
  });

  it("refused connection", async () => {
    const tool = hostTool({ url: `http://127.0.0.1:${await closedPort()}/tool` });
    expectError(await call(tool).result, false, /^tool "probe" could not be reached$/);
  });

  it("DNS failure", async () => {
    const tool = hostTool({ url: "http://no-such-host.invalid/tool" });
    expectError(await call(tool).result, false, /could not be reached/);
  });

  it("a 4xx answer: the tool said it did not act", async () => {
    const tool = route((_q, res) => json(res, 422, { error: "nope" }));
    expectError(await call(tool).result, false, /^tool "probe" returned HTTP 422$/);
  });

  it("a redirect, which is not followed", async () => {
    const tool = route((_q, res) => res.writeHead(307, { location: `${base}/elsewhere` }).end());
    expectError(await call(tool).result, false, /returned HTTP 307/);
    expect(seen.get("/elsewhere")).toBeUndefined();
  });

  it("interrupted before dispatch: the server sees no request", async () => {
    const tool = route((_q, res) => json(res, 200, OK));
    const ac = new AbortController();
    ac.abort();
    expectError(await call(tool, { ctx: { signal: ac.signal } }).result, false, /interrupted before it was sent/);
    expect(requestsTo(tool)).toHaveLength(0);
  });
});

describe("failures after dispatch: unknown_outcome true", () => {
  it("a 5xx answer", async () => {
    const tool = route((_q, res) => res.writeHead(503).end("busy"));
    expectError(await call(tool).result, true, /^tool "probe" returned HTTP 503$/);
  });

  it("invalid JSON", async () => {
    const tool = route((_q, res) => res.writeHead(200, { "content-type": "application/json" }).end("{not json"));
    expectError(await call(tool).result, true, /^tool "probe" returned invalid JSON$/);
  });

  it("JSON that is not a Result", async () => {
    const tool = route((_q, res) => json(res, 200, { content: [{ type: "image", data: "AA==", mimeType: "image/png" }] }));
    expectError(await call(tool).result, true, /invalid result: content\[0\]\.mime_type: /);
  });

  it("JSON a request body could not be: a repeated member, a lone surrogate, nesting over 64 levels (also in a progress frame)", async () => {
    const raw = (text: string) => route((_q, res) => res.writeHead(200, { "content-type": "application/json" }).end(text));
    expectError(await call(raw('{"content":[],"is_error":false,"is_error":true}')).result, true, /^tool "probe" returned JSON that gives is_error more than once$/);
    expectError(await call(raw('{"content":[{"type":"text","text":"a\\ud800b"}]}')).result, true, /returned JSON that cannot be recorded as sent \(content\[0\]\.text: text is not valid Unicode/);
    const deep = `{"content":[],"structured_content":${"[".repeat(64)}${"]".repeat(64)}}`;
    expectError(await call(raw(deep)).result, true, /^tool "probe" returned JSON nested deeper than 64 levels$/);
    const sse = route((_q, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`event: progress\ndata: {"a":1,"a":2}\n\nevent: result\ndata: ${JSON.stringify(OK)}\n\n`);
    });
    expectError(await call(sse).result, true, /returned JSON in a progress frame that gives a more than once/);
    const bare = route((_q, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`event: progress\ndata: "\\ud800"\n\nevent: result\ndata: ${JSON.stringify(OK)}\n\n`);
    });
    expectError(await call(bare).result, true, /in a progress frame that cannot be recorded as sent \(text is not valid Unicode \(a lone surrogate\)\)$/);
  });

  it("an image whose data is not base64, or whose mime_type is not a media type, is not a Result", async () => {
    const image = (item: object) => route((_q, res) => json(res, 200, { content: [{ type: "image", ...item }] }));
    expectError(await call(image({ data: "%%%", mime_type: "image/png" })).result, true, /invalid result: content\[0\]\.data: not base64$/);
    expectError(await call(image({ data: "AAA", mime_type: "image/png" })).result, true, /not base64$/);
    expectError(await call(image({ data: "", mime_type: "image/png" })).result, true, /content\[0\]\.data: empty$/);
    expectError(await call(image({ data: "AA==", mime_type: "png" })).result, true, /content\[0\]\.mime_type: not a media type/);
    expect(await call(image({ data: "AA==", mime_type: "image/svg+xml; charset=utf-8" })).result).toEqual({ content: [{ type: "image", data: "AA==", mime_type: "image/svg+xml; charset=utf-8" }] });
  });

  it("a success that claims an unknown outcome is not a Result", async () => {
    const tool = route((_q, res) => json(res, 200, { content: [], unknown_outcome: true }));
    expectError(await call(tool).result, true, /invalid result: unknown_outcome is for an error result/);
    const error = route((_q, res) => json(res, 200, { content: [], is_error: true, unknown_outcome: true }));
    expect(await call(error).result).toEqual({ content: [], is_error: true, unknown_outcome: true });
  });

  it("an answer of another content type", async () => {
    const tool = route((_q, res) => res.writeHead(200, { "content-type": "text/plain" }).end("done"));
    expectError(await call(tool).result, true, /unsupported content type "text\/plain"/);
  });

  it("an SSE stream that ends without result", async () => {
    const tool = route((_q, res) => res.writeHead(200, { "content-type": "text/event-stream" }).end('event: progress\ndata: {"n":1}\n\n'));
    const { progress, result } = call(tool);
    expectError(await result, true, /ended its event stream without a result/);
    expect(progress).toEqual([{ n: 1 }]);
  });

  it("a drop mid-response", async () => {
    const tool = route((_q, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"content":[', () => res.socket!.destroy());
    });
    expectError(await call(tool).result, true, /connection dropped before the result arrived/);
  });

  it.each(["gzip", "deflate", "br", "zstd"])("a body its Content-Encoding (%s) does not hold", async (encoding) => {
    const tool = route((_q, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-encoding": encoding });
      res.end("not encoded at all");
    });
    expectError(await call(tool).result, true, /answer could not be decoded \(its Content-Encoding\)/);
  });

  it("a drop before any response", async () => {
    const tool = route((req) => req.socket.destroy());
    expectError(await call(tool).result, true, /connection failed after the request was sent/);
  });

  it("a timeout (timeout_seconds 1) covering the whole stream", async () => {
    const tool = route((_q, res) => res.writeHead(200, { "content-type": "text/event-stream" }).write('event: progress\ndata: "started"\n\n'), {
      timeout_seconds: 1,
    });
    const started = Date.now();
    const { progress, result } = call(tool);
    expectError(await result, true, /^tool "probe" timed out after 1 s$/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(990);
    expect(progress).toEqual(["started"]);
  });

  it("an oversized JSON body", async () => {
    const text = "x".repeat(200);
    const tool = route((_q, res) => json(res, 200, { content: [{ type: "text", text }] }), { max_output_bytes: 100 });
    expectError(await call(tool).result, true, /output exceeded max_output_bytes \(100\)/);
  });

  it("max_output_bytes counts the bytes the tool sent: an answer of exactly the limit passes, one more byte fails", async () => {
    // `1e20` is written back as 21 digits: the Result as recorded is longer than the answer.
    const body = '{"content":[{"type":"text","text":"e"}],"structured_content":{"n":1e20}}';
    const at = route((_q, res) => res.writeHead(200, { "content-type": "application/json" }).end(body), { max_output_bytes: Buffer.byteLength(body) });
    expect(await call(at).result).toEqual({ content: [{ type: "text", text: "e" }], structured_content: { n: 1e20 } });
    const over = route((_q, res) => res.writeHead(200, { "content-type": "application/json" }).end(body), { max_output_bytes: Buffer.byteLength(body) - 1 });
    expectError(await call(over).result, true, /output exceeded max_output_bytes \(71\)/);
  });

  it("a Result longer than the largest max_output_bytes once written as JSON is an error with an unknown outcome; exactly that long it passes", async () => {
    // Answers of exactly 2 MiB, as sent: `1e2` is written back as `100` (the same length), `1e3`
    // as `1000` (one byte more). Keys in the Result's own order, so nothing else moves.
    const answer = (n: string) => {
      const shell = `{"content":[{"type":"text","text":""}],"structured_content":${n}}`;
      return shell.replace('"text":""', `"text":"${"x".repeat(2_097_152 - shell.length)}"`);
    };
    const send = (body: string) => {
      expect(Buffer.byteLength(body)).toBe(2_097_152);
      return route((_q, res) => res.writeHead(200, { "content-type": "application/json" }).end(body), { max_output_bytes: 2_097_152 });
    };
    const fits = await call(send(answer("1e2"))).result;
    expect(fits.is_error).toBeUndefined();
    expect(Buffer.byteLength(JSON.stringify(fits))).toBe(2_097_152);
    expectError(await call(send(answer("1e3"))).result, true, /^tool "probe" result is 2097153 bytes written as JSON, over 2097152$/);
  });

  it("a credential the tool echoes back is redacted before that bound is applied: [redacted] is longer than the value", async () => {
    // 840,000 bytes of "abcd" as sent (under the default max_output_bytes) become 2,100,000 redacted.
    const echo = (times: number) => route((_q, res) => json(res, 200, { content: [{ type: "text", text: "abcd".repeat(times) }] }));
    const fits = await call(echo(200_000), { secrets: ["abcd"] }).result;
    expect(fits).toEqual({ content: [{ type: "text", text: "[redacted]".repeat(200_000) }] });
    expectError(await call(echo(210_000), { secrets: ["abcd"] }).result, true, /^tool "probe" result is 2100039 bytes written as JSON, over 2097152$/);
  });

  it("oversized SSE progress: progress frames count toward max_output_bytes", async () => {
    const frame = `event: progress\ndata: ${JSON.stringify("p".repeat(100))}\n\n`;
    const tool = route(
      (_q, res) => res.writeHead(200, { "content-type": "text/event-stream" }).end(frame.repeat(20) + `event: result\ndata: ${JSON.stringify(OK)}\n\n`),
      { max_output_bytes: 1000 },
    );
    const { progress, result } = call(tool);
    expectError(await result, true, /output exceeded max_output_bytes/);
    expect(progress.length).toBeLessThan(20);
  });

  it("an output_schema failure: the tool did run", async () => {
    const output_schema = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
    const tool = route((_q, res) => json(res, 200, { ...OK, structured_content: { n: "one" } }), { output_schema });
    expectError(await call(tool).result, true, /does not match its output_schema: \/n: /);
  });

  it("interrupted via the turn's signal mid-call", async () => {
    const arrived = deferred();
    const tool = route((_q, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" }).write(": open\n\n");
      arrived.resolve();
    });
    const ac = new AbortController();
    const { result } = call(tool, { ctx: { signal: ac.signal } });
    await arrived.promise;
    ac.abort();
    expectError(await result, true, /call was interrupted; its outcome is unknown/);
  });
});

describe("results", () => {
  it("streams progress frames in order, with CRLF, multi-line data and comments, then the result", async () => {
    const tool = route((_q, res) => {
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
      res.write(": keepalive\r\n\r\nevent: progress\r\ndata: {\"step\":1}\r\n\r\n");
      res.write('event: progress\ndata: {"step":\ndata: 2}\n\n');
      res.end(`event: result\ndata: ${JSON.stringify({ ...OK, structured_content: { n: 3 } })}\n\n`);
    });
    const { progress, result } = call(tool);
    expect(await result).toEqual({ ...OK, structured_content: { n: 3 } });
    expect(progress).toEqual([{ step: 1 }, { step: 2 }]);
  });

  it("takes a result frame ended by CR line breaks, byte by byte", async () => {
    const tool = route(async (_q, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (const ch of `event: progress\rdata: 1\r\revent: result\rdata: ${JSON.stringify(OK)}\r\r`) {
        await new Promise<void>((r) => res.write(ch, () => r()));
      }
      res.end();
    });
    const { progress, result } = call(tool);
    expect(await result).toEqual(OK);
    expect(progress).toEqual([1]);
  });

  it("drops a result frame left unfinished at the end of the stream", async () => {
    const tool = route((_q, res) => res.writeHead(200, { "content-type": "text/event-stream" }).end(`event: result\ndata: ${JSON.stringify(OK)}\n`));
    expectError(await call(tool).result, true, /ended its event stream without a result/);
  });

  it("passes a valid structured_content and image content", async () => {
    const output_schema = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
    const answer = { content: [{ type: "image", data: "AAAA", mime_type: "image/png" }], structured_content: { n: 1 } };
    const tool = route((_q, res) => json(res, 200, answer), { output_schema });
    expect(await call(tool).result).toEqual(answer);
  });

  it("error results bypass output_schema", async () => {
    const output_schema = { type: "object", required: ["n"] };
    const answer = { content: [{ type: "text", text: "tool-side failure" }], is_error: true };
    const tool = route((_q, res) => json(res, 200, answer), { output_schema });
    expect(await call(tool).result).toEqual(answer);
  });

  it("error results still obey max_output_bytes", async () => {
    const answer = { content: [{ type: "text", text: "e".repeat(300) }], is_error: true };
    const tool = route((_q, res) => json(res, 200, answer), { max_output_bytes: 200 });
    expectError(await call(tool).result, true, /output exceeded max_output_bytes/);
  });
});
