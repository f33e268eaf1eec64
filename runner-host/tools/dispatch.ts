/**
 * The single entry for executing a host tool call: picks the transport, then applies the output
 * cap both share. The turn machinery calls this and records whatever comes back as `tool.result`;
 * it never throws.
 */
import { callHttpTool } from "./http-tool.ts";
import { callMcpTool } from "./mcp-tool.ts";
import { errorResult, isOwnResult, jsonBytes, label } from "./outcome.ts";
import type { HostTool } from "../../src/shared/config-schema.ts";
import type { ToolResult } from "../../src/shared/result-schema.ts";
import type { ToolCallContext, ToolCallRequest, ToolEnv } from "./types.ts";

export async function executeHostTool(tool: HostTool, req: ToolCallRequest, ctx: ToolCallContext, env: ToolEnv): Promise<ToolResult> {
  // shapeDispatch seam: runtime (executor) tools slot in here as a third transport, with the same
  // (request, context) → Result contract; their calls travel over the executor command stream.
  let result: ToolResult;
  try {
    result = tool.transport === "mcp" ? await callMcpTool(tool, req, ctx, env) : await callHttpTool(tool, req, ctx, env);
  } catch {
    // The transports map every failure themselves; reaching here is a bug, and the call may have run.
    return errorResult(`${label(tool)} failed unexpectedly`, true);
  }
  return capOutput(tool, result);
}

/**
 * A Result over `max_output_bytes` is an error with an unknown outcome (docs/api.md "Tools"; the
 * tool ran). Measured as the UTF-8 length of the Result's JSON, the form it is recorded in. Both
 * transports have already counted the raw response bytes, progress included, which are at least
 * this in practice; this check is the floor any future transport gets for free.
 * Tool error results are capped too ("size limits still apply"); only our own messages are not.
 */
export function capOutput(tool: HostTool, result: ToolResult, limit = "max_output_bytes"): ToolResult {
  if (isOwnResult(result)) return result;
  const bytes = jsonBytes(result);
  if (bytes <= tool.max_output_bytes) return result;
  return errorResult(`${label(tool)} output exceeded ${limit} (${bytes} > ${tool.max_output_bytes})`, true);
}
