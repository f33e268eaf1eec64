/**
 * One host tool call over the native HTTP/SSE wire (docs/api.md "Tools"): `POST url`
 * with `{"call_id","tool","arguments","scope"?}`; the answer is either `application/json` holding a
 * Result, or `text/event-stream` with `progress` frames and one final `result` frame. Every outcome
 * becomes a Result; this function does not throw. Calls are never retried (docs/api.md "Tools").
 */
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { validateInput } from "../../src/shared/json-schema.ts";
import { sendableValue, SENDABLE_VALUE_RULE, serviceSetHeader, unsendableHeader } from "../../src/shared/credential-headers.ts";
import { MAX_JSON_DEPTH, notAsSent, parseWithinDepth } from "../../src/shared/json-text.ts";
import { CallBudget, checkOutput, errorResult, label, neverSent, parseResult, stoppedResult, undecodable } from "./outcome.ts";
import { toolFetch } from "./tool-fetch.ts";
import type { HostTool } from "../../src/shared/config-schema.ts";
import type { ToolResult } from "../../src/shared/result-schema.ts";
import type { ToolCallContext, ToolCallRequest, ToolEnv } from "./types.ts";

/** W3C Trace Context `traceparent` (version-traceid-parentid-flags); anything else is not forwarded. */
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;


/** A broken answer from the tool (bad JSON, bad Result, bad frame): the tool did receive the call. */
class BrokenAnswer extends Error {}

/**
 * Credential and trace headers shared by both transports, or a reason the call cannot be sent. A
 * per-session override (`ctx.bearer` or `ctx.headers`) replaces the `token_env` bearer; without
 * one, a configured `token_env` that is unset now is a missing local credential. Messages never
 * contain a header value: they go back to the model.
 */
export function callHeaders(tool: HostTool, ctx: ToolCallContext, env: ToolEnv): Headers | string {
  const headers = new Headers();
  const problem = ctx.headers ? unsendableHeader(ctx.headers) : ctx.bearer !== undefined && !sendableValue(ctx.bearer) ? `its value is not ${SENDABLE_VALUE_RULE}` : undefined;
  // Not sent: the tool never saw the request (no unknown outcome).
  if (problem) return `${label(tool)} has a credential it cannot send: ${problem}`;
  try {
    for (const [name, value] of Object.entries(ctx.headers ?? {})) if (!serviceSetHeader(name)) headers.set(name, value);
    if (ctx.bearer !== undefined) {
      headers.set("authorization", `Bearer ${ctx.bearer}`);
    } else if (ctx.headers === undefined && tool.token_env) {
      const token = env[tool.token_env];
      if (!token) return `${label(tool)} is missing its credential`;
      headers.set("authorization", `Bearer ${token}`);
    }
  } catch {
    return `${label(tool)} has a credential that is not a valid HTTP header value`;
  }
  if (ctx.traceparent !== undefined && TRACEPARENT.test(ctx.traceparent)) headers.set("traceparent", ctx.traceparent);
  return headers;
}

/** The request body. Inspection fields are sent only to tools configured with `inspect_session`. */
function wireBody(tool: HostTool, req: ToolCallRequest): string {
  const body: Record<string, unknown> = { call_id: req.call_id, tool: req.tool, arguments: req.arguments };
  if (req.scope) {
    const { service_url, inspection_token, ...scope } = req.scope;
    body.scope = tool.inspect_session ? { ...scope, service_url, inspection_token } : scope;
  }
  return JSON.stringify(body);
}

export async function callHttpTool(tool: HostTool, req: ToolCallRequest, ctx: ToolCallContext, env: ToolEnv): Promise<ToolResult> {
  const problem = validateInput(tool.input_schema, req.arguments);
  if (problem !== null) return errorResult(`invalid arguments for ${label(tool)}: ${problem}`, false);
  const headers = callHeaders(tool, ctx, env);
  if (typeof headers === "string") return errorResult(headers, false);
  headers.set("content-type", "application/json");
  headers.set("accept", "application/json, text/event-stream");
  if (ctx.signal.aborted) return errorResult(`${label(tool)} call was interrupted before it was sent`, false);
  const body = wireBody(tool, req);

  const budget = new CallBudget(tool.timeout_seconds, ctx.signal);
  try {
    let res: Response;
    try {
      // Redirects are not followed: that would re-send the body, and the bearer, somewhere else.
      res = await toolFetch(tool.url, { method: "POST", headers, body, signal: budget.signal, redirect: "manual" });
    } catch (err) {
      if (budget.stopped) return stoppedResult(tool, budget.stopped);
      if (neverSent(err)) return errorResult(`${label(tool)} could not be reached`, false);
      return errorResult(`${label(tool)} connection failed after the request was sent`, true);
    }
    return await readAnswer(tool, res, ctx, budget);
  } catch (err) {
    if (budget.stopped) return stoppedResult(tool, budget.stopped);
    if (err instanceof BrokenAnswer) return errorResult(`${label(tool)} ${err.message}`, true);
    if (undecodable(err)) return errorResult(`${label(tool)} answer could not be decoded (its Content-Encoding)`, true);
    return stoppedResult(tool, "dropped");
  } finally {
    budget.dispose();
  }
}

async function readAnswer(tool: HostTool, res: Response, ctx: ToolCallContext, budget: CallBudget): Promise<ToolResult> {
  if (res.status < 200 || res.status > 299) {
    await res.body?.cancel().catch(() => {});
    // A 4xx (and an unfollowed 3xx) is the tool declining to act; a 5xx may come after it acted.
    return errorResult(`${label(tool)} returned HTTP ${res.status}`, res.status >= 500);
  }
  const type = (res.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type === "application/json") return checkOutput(tool, await readJson(tool, res, budget));
  if (type === "text/event-stream") return checkOutput(tool, await readEvents(tool, res, ctx, budget));
  await res.body?.cancel().catch(() => {});
  return errorResult(`${label(tool)} answered with unsupported content type "${type}"`, true);
}

/**
 * Reads the body, counting every byte against `max_output_bytes`; over the cap the budget stops
 * the call, which aborts the read. `take` returns true once it has what it needs. Throws when the
 * read fails: a drop, or the budget's abort reason.
 */
async function readCapped(tool: HostTool, res: Response, budget: CallBudget, take: (chunk: Uint8Array) => boolean): Promise<void> {
  if (!res.body) return;
  const reader = res.body.getReader();
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      total += value.byteLength;
      if (total > tool.max_output_bytes) {
        budget.stop("oversize");
        // The caller reads the budget's reason; what is thrown only unwinds.
        throw new Error("max_output_bytes exceeded");
      }
      if (take(value)) return;
    }
  } finally {
    // Releases the connection when we stop early; a no-op after the end of the body.
    reader.cancel().catch(() => {});
  }
}

function resultFrom(value: unknown): ToolResult {
  const parsed = parseResult(value);
  if ("problem" in parsed) throw new BrokenAnswer(`returned an invalid result: ${parsed.problem}`);
  return parsed.result;
}

/**
 * The strict JSON a request body must be (docs/api.md "Request bodies"), so a tool's answer is
 * recorded as it was sent and every reader can parse it: nesting at most MAX_JSON_DEPTH levels, no
 * repeated member name (JSON.parse would keep the last silently), no lone surrogate.
 */
function parseJson(text: string, what: string): unknown {
  const parsed = parseWithinDepth(text);
  if ("deep" in parsed) throw new BrokenAnswer(`returned JSON${what} nested deeper than ${MAX_JSON_DEPTH} levels`);
  if ("syntax" in parsed) throw new BrokenAnswer(`returned invalid JSON${what}`);
  const lost = notAsSent(text, parsed.value);
  if (lost && "unkept" in lost) throw new BrokenAnswer(`returned JSON${what} that cannot be recorded as sent (${lost.unkept})`);
  if (lost) throw new BrokenAnswer(`returned JSON${what} that gives ${lost.repeated} more than once`);
  return parsed.value;
}

/** A streaming UTF-8 decoder; invalid bytes are a broken answer, described by `what`. */
function utf8(what: string): (chunk?: Uint8Array) => string {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  return (chunk) => {
    try {
      return chunk ? decoder.decode(chunk, { stream: true }) : decoder.decode();
    } catch {
      throw new BrokenAnswer(what);
    }
  };
}

async function readJson(tool: HostTool, res: Response, budget: CallBudget): Promise<ToolResult> {
  const decode = utf8("returned invalid JSON (not UTF-8)");
  let text = "";
  await readCapped(tool, res, budget, (chunk) => ((text += decode(chunk)), false));
  text += decode();
  return resultFrom(parseJson(text, ""));
}

/**
 * Reads an event stream (WHATWG server-sent events, parsed by eventsource-parser): `progress`
 * frames are relayed, the first `result` frame ends the read. Other event names are not part of
 * the wire format and are skipped; an event left unfinished at the end of the stream is dropped.
 */
async function readEvents(tool: HostTool, res: Response, ctx: ToolCallContext, budget: CallBudget): Promise<ToolResult> {
  const decode = utf8("sent an event stream that is not UTF-8");
  // Collected during feed() and handled after it returns, so a broken frame throws to our caller
  // rather than into the parser's callback.
  const frames: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (frame) => frames.push(frame) });
  let result: ToolResult | undefined;
  const handle = (text: string): boolean => {
    parser.feed(text);
    for (const { event, data } of frames.splice(0)) {
      if (event === "progress") ctx.onProgress(parseJson(data, " in a progress frame"));
      else if (event === "result") {
        result = resultFrom(parseJson(data, " in its result frame"));
        return true;
      }
    }
    return false;
  };
  await readCapped(tool, res, budget, (chunk) => handle(decode(chunk)));
  if (result === undefined) handle(decode());
  if (result === undefined) throw new BrokenAnswer("ended its event stream without a result");
  return result;
}
