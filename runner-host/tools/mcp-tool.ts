/**
 * One host tool call to a remote MCP tool over Streamable HTTP (`mcp_tool`, docs/api.md "Tools"),
 * mapped to a Result. The unknown_outcome line is `tools/call`: a failure while connecting
 * (initialize) leaves it absent, a failure once that request may have reached the server sets it.
 *
 * Cost: one client per call, nothing pooled. A call is an initialize POST, the initialized
 * notification, the server's optional GET stream, the `tools/call` POST and a closing DELETE, so
 * about three round trips more than the native HTTP wire. Pooling sessions per (url, credential)
 * is the upgrade when MCP tools get hot.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError, type CallToolResult, type ContentBlock, type Progress } from "@modelcontextprotocol/sdk/types.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import { bounded, foreign } from "../error-text.ts";
import { callHeaders } from "./http-tool.ts";
import { watchedFetch, type Broken } from "./mcp-fetch.ts";
import { validateInput } from "../../src/shared/json-schema.ts";
import { headerSecrets } from "../../src/shared/credential-headers.ts";
import { CallBudget, checkOutput, errorResult, label, neverSent, stoppedResult } from "./outcome.ts";
import type { HostTool } from "../../src/shared/config-schema.ts";
import { imageProblem, type ContentItem, type ToolResult } from "../../src/shared/result-schema.ts";
import type { ToolCallContext, ToolCallRequest, ToolEnv } from "./types.ts";

const CLIENT_INFO = { name: "svc-runner-host", version: "1" };

/** The SDK's default validator is Ajv, which generates code; this one interprets (workerd-safe). */
const SCHEMA_VALIDATOR = new CfWorkerJsonSchemaValidator();

/** Time allowed for the closing DELETE before the transport is torn down anyway, ms. */
const CLOSE_GRACE_MS = 2_000;

/** JSON-RPC errors by which a server refuses a request without running it (like an HTTP 4xx). */
const REFUSED: ReadonlySet<number> = new Set([ErrorCode.ParseError, ErrorCode.InvalidRequest, ErrorCode.MethodNotFound, ErrorCode.InvalidParams]);
/**
 * `InvalidParams` messages that come after the tool ran: the MCP TypeScript SDK's servers check
 * the handler's result (and its structured content against the output schema) and answer such a
 * failure with that code too, so these are not refusals. Its high-level server sends the output
 * check's failure as an `isError` result with the same words: that too has an unknown outcome.
 */
const AFTER_RUN = /^(?:MCP error -?\d+: )*(Invalid tools\/call result|Output validation error)\b/;

/**
 * Longest part of a server's error message passed on to the model, UTF-8 bytes. The message is cut
 * only after it was redacted: a secret cut in two would no longer match its exact value.
 */
const MESSAGE_BYTES = 200;

export async function callMcpTool(tool: HostTool, req: ToolCallRequest, ctx: ToolCallContext, env: ToolEnv): Promise<ToolResult> {
  const problem = validateInput(tool.input_schema, req.arguments);
  if (problem !== null) return errorResult(`invalid arguments for ${label(tool)}: ${problem}`, false);
  const headers = callHeaders(tool, ctx, env);
  if (typeof headers === "string") return errorResult(headers, false);
  if (ctx.signal.aborted) return errorResult(`${label(tool)} call was interrupted before it was sent`, false);

  const budget = new CallBudget(tool.timeout_seconds, ctx.signal);
  const broken: Broken = {};
  const transport = new StreamableHTTPClientTransport(new URL(tool.url), {
    // A 3xx is the server's answer: following it would send the request again (calls are never
    // retried). `manual` reaches fetch unchanged for the message POSTs and the DELETE; the SDK's
    // default would follow a same-origin redirect itself, sending `tools/call` again.
    requestInit: { headers: Object.fromEntries(headers), redirect: "manual" },
    fetch: watchedFetch(tool, budget, broken),
  });
  const client = new Client(CLIENT_INFO, { jsonSchemaValidator: SCHEMA_VALIDATOR });
  // The SDK's own timer would default to 60 s; the budget enforces timeout_seconds over the whole call.
  const timeout = tool.timeout_seconds * 1000;
  try {
    const connecting = linked(budget.signal);
    try {
      await client.connect(transport, { signal: connecting.signal, timeout });
    } catch {
      if (budget.stopped === "invalid") return errorResult(`${label(tool)} MCP server ${broken.why}`, false);
      if (budget.stopped === "timeout") return errorResult(`${label(tool)} timed out before the call was sent`, false);
      if (budget.stopped) return errorResult(`${label(tool)} call was interrupted before it was sent`, false);
      return errorResult(`${label(tool)} could not connect to its MCP server`, false);
    } finally {
      connecting.unlink();
    }
    let raw: CallToolResult;
    try {
      raw = (await client.callTool({ name: tool.mcp_tool || tool.name, arguments: req.arguments as Record<string, unknown> }, undefined, {
        signal: budget.signal,
        timeout,
        onprogress: (p) => ctx.onProgress(progressData(p)),
      })) as CallToolResult;
    } catch (err) {
      if (budget.stopped === "invalid") return errorResult(`${label(tool)} MCP server ${broken.why}`, true);
      if (budget.stopped) return stoppedResult(tool, budget.stopped);
      return callFailure(tool, err, callSecrets(tool, ctx, env));
    }
    const result = toResult(raw);
    const image = imageProblem(result);
    if (image) return errorResult(`${label(tool)} MCP server returned an invalid result: ${image}`, true);
    return checkOutput(tool, result);
  } finally {
    budget.dispose();
    // Not awaited: the result does not wait for the session's teardown.
    void close(client, transport);
  }
}

/** An AbortSignal that follows `parent` until unlinked, so the SDK's listener on it can be dropped. */
function linked(parent: AbortSignal): { signal: AbortSignal; unlink(): void } {
  const child = new AbortController();
  const follow = () => child.abort(parent.reason);
  parent.addEventListener("abort", follow, { once: true });
  if (parent.aborted) follow();
  return { signal: child.signal, unlink: () => parent.removeEventListener("abort", follow) };
}

/** Ends the server's session (a stateful server keeps one per client otherwise), then the transport. */
async function close(client: Client, transport: StreamableHTTPClientTransport): Promise<void> {
  const grace = setTimeout(() => void client.close().catch(() => {}), CLOSE_GRACE_MS);
  try {
    await transport.terminateSession();
  } catch {
    // Best effort: the session also ends when the server drops it.
  } finally {
    clearTimeout(grace);
    await client.close().catch(() => {}); // closing a transport that already failed: nothing left to do
  }
}

/** What this call authenticates with: the values a server's error text must not carry on. */
function callSecrets(tool: HostTool, ctx: ToolCallContext, env: ToolEnv): string[] {
  const out = headerSecrets(ctx.headers ?? {});
  if (ctx.bearer !== undefined) out.push(ctx.bearer);
  const fromEnv = tool.token_env ? env[tool.token_env] : undefined;
  if (fromEnv) out.push(fromEnv);
  return out;
}

function callFailure(tool: HostTool, err: unknown, secrets: string[]): ToolResult {
  if (neverSent(err)) return errorResult(`${label(tool)} could not be reached`, false);
  const status = err instanceof StreamableHTTPError ? (err.code ?? 0) : 0;
  // A 3xx here is a redirect the SDK would not follow; like a 4xx, the server did not act.
  if (status >= 300 && status <= 599) return errorResult(`${label(tool)} MCP server returned HTTP ${status}`, status >= 500);
  if (err instanceof McpError) {
    // The client prefixes "MCP error <code>: ", and an SDK server's own message often starts so too.
    const text = err.message.replace(/^(?:MCP error -?\d+: )+/, "");
    // Servers put pretty-printed JSON (validation issues) in messages: one line of single spaces.
    const message = bounded(foreign(text, secrets).replace(/\s+/g, " "), MESSAGE_BYTES);
    const refused = REFUSED.has(err.code) && !(err.code === ErrorCode.InvalidParams && AFTER_RUN.test(text));
    return errorResult(`${label(tool)} MCP server answered with an error: ${message}`, !refused);
  }
  return errorResult(`${label(tool)} MCP call failed after it was sent`, true);
}

function progressData(p: Progress): Record<string, unknown> {
  const data: Record<string, unknown> = { progress: p.progress };
  if (p.total !== undefined) data.total = p.total;
  if (p.message !== undefined) data.message = p.message;
  return data;
}

/** Result content is text or image; other MCP content becomes a text line saying what it was. */
function toContent(block: ContentBlock): ContentItem {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text };
    case "image":
      return { type: "image", data: block.data, mime_type: block.mimeType };
    case "audio":
      return { type: "text", text: `[audio (${block.mimeType}) omitted]` };
    case "resource_link":
      return { type: "text", text: `[resource link: ${block.name} ${block.uri}]` };
    case "resource": {
      const { resource } = block;
      if ("text" in resource) return { type: "text", text: `[resource ${resource.uri}]\n${resource.text}` };
      return { type: "text", text: `[resource ${resource.uri} (${resource.mimeType ?? "binary"}) omitted]` };
    }
    default:
      return { type: "text", text: `[unsupported content omitted]` };
  }
}

function toResult(raw: CallToolResult): ToolResult {
  const result: ToolResult = { content: raw.content.map(toContent) };
  if (raw.isError) result.is_error = true;
  const first = raw.content[0];
  if (raw.isError && first?.type === "text" && AFTER_RUN.test(first.text)) result.unknown_outcome = true;
  if (raw.structuredContent !== undefined) result.structured_content = raw.structuredContent;
  return result;
}
