/**
 * The single entry for executing a host tool call: picks the transport, removes the call's
 * credentials from the Result, then bounds it as it will be recorded. The turn machinery calls
 * this and records whatever comes back as `tool.result`; it never throws.
 */
import { callHttpTool } from "./http-tool.ts";
import { callMcpTool } from "./mcp-tool.ts";
import { capJson, errorResult, label } from "./outcome.ts";
import { redactValues } from "../error-text.ts";
import type { HostTool } from "../../src/shared/config-schema.ts";
import { TOOL_MAX_OUTPUT_BYTES } from "../../src/shared/config-tools.ts";
import type { ToolResult } from "../../src/shared/result-schema.ts";
import type { ToolCallContext, ToolCallRequest, ToolEnv } from "./types.ts";

/** `secrets`: what the call authenticated with, replaced by `[redacted]` wherever the Result holds it. */
export async function executeHostTool(tool: HostTool, req: ToolCallRequest, ctx: ToolCallContext, env: ToolEnv, secrets: readonly string[] = []): Promise<ToolResult> {
  // shapeDispatch seam: runtime (executor) tools slot in here as a third transport, with the same
  // (request, context) → Result contract; their calls travel over the executor command stream.
  let result: ToolResult;
  try {
    result = tool.transport === "mcp" ? await callMcpTool(tool, req, ctx, env) : await callHttpTool(tool, req, ctx, env);
  } catch {
    // The transports map every failure themselves; reaching here is a bug, and the call may have run.
    return errorResult(`${label(tool)} failed unexpectedly`, true);
  }
  // Redacted first: `[redacted]` is longer than a value it replaces (up to 2.5× for 4 characters).
  return capRecorded(tool, redactValues(result, secrets));
}

/**
 * The largest a host tool's Result may be once written back as JSON, bytes: the largest
 * `max_output_bytes` there is, which the harness line and the retained record are sized for.
 */
const MAX_RECORDED_BYTES = TOOL_MAX_OUTPUT_BYTES.max;

/**
 * `max_output_bytes` counts the bytes the tool sent (both transports count them as they read,
 * progress included; docs/api.md "Tools"). The Result written back as JSON, the form it is recorded
 * and handed to the model in, can be longer than those bytes (`1e20` is written out in 21 digits,
 * a credential echoed back becomes `[redacted]`), so that
 * form has a bound of its own, the largest `max_output_bytes`; past it the call is an error with an
 * unknown outcome too (the tool ran).
 */
function capRecorded(tool: HostTool, result: ToolResult): ToolResult {
  return capJson(result, MAX_RECORDED_BYTES, (bytes) => `${label(tool)} result is ${bytes} bytes written as JSON, over ${MAX_RECORDED_BYTES}`);
}
