/**
 * The checks a tool's Result passes before it is a call's outcome (docs/api.md "Tools",
 * "Executors"). `outputProblem`: a success's `structured_content` against the tool's
 * `output_schema` — for host tools (runner-host/tools/outcome.ts) and executors alike.
 * `checkRuntimeResult`: that, then an executor's Result as JSON within the runtime tool result
 * limit; a failed check is an error with an unknown outcome (the executor ran). It runs where a
 * reply is taken, the session object (the result it records itself when the turn's work ends
 * before the runner-host's `tool_result`), and again by the runner-host, before the harness sees it.
 */
import { validateOutput } from "./json-schema.ts";
import { TOOL_MAX_OUTPUT_BYTES } from "./config-tools.ts";
import { byteLength } from "./ids.ts";
import type { ToolResult } from "./result-schema.ts";

/** Runtime tools have no host configuration entry: the host tools' default `max_output_bytes`, counted on the Result's JSON. */
export const RUNTIME_RESULT_BYTES = TOOL_MAX_OUTPUT_BYTES.default;

/**
 * Why a successful Result fails the tool's `output_schema`, or undefined (error results bypass it).
 * A success without `structured_content` fails too, as MCP requires of tools that declare one.
 */
export function outputProblem(name: string, schema: Record<string, unknown> | null | undefined, result: ToolResult): string | undefined {
  if (result.is_error || !schema) return undefined;
  if (result.structured_content === undefined) return `tool "${name}" returned no structured_content although it declares an output_schema`;
  const problem = validateOutput(schema, result.structured_content);
  return problem === null ? undefined : `tool "${name}" returned structured_content that does not match its output_schema: ${problem}`;
}

export function checkRuntimeResult(d: { name: string; output_schema?: Record<string, unknown> | null }, result: ToolResult): ToolResult {
  const failed = (text: string): ToolResult => ({ content: [{ type: "text", text }], is_error: true, unknown_outcome: true });
  const problem = outputProblem(d.name, d.output_schema, result);
  if (problem) return failed(problem);
  const bytes = byteLength(JSON.stringify(result));
  if (bytes > RUNTIME_RESULT_BYTES) return failed(`tool "${d.name}" output exceeded the runtime tool result limit (${bytes} > ${RUNTIME_RESULT_BYTES})`);
  return result;
}
