/**
 * The checks an executor's Result passes before it is a call's outcome (docs/api.md "Executors"):
 * `structured_content` of a success against the descriptor's `output_schema`, then the Result's
 * JSON within the runtime tool result limit. A failed check is an error with an unknown outcome
 * (the executor ran). One function for both places a result is taken: the session object, as it
 * accepts the reply (the result it records itself when the turn's work ends before the
 * runner-host's `tool_result`), and the runner-host, before the harness sees it.
 */
import { validateOutput } from "./json-schema.ts";
import { TOOL_MAX_OUTPUT_BYTES } from "./config-tools.ts";
import type { ToolResult } from "./result-schema.ts";

/** Runtime tools have no host configuration entry: the host tools' default `max_output_bytes`, counted on the Result's JSON. */
export const RUNTIME_RESULT_BYTES = TOOL_MAX_OUTPUT_BYTES.default;

const encoder = new TextEncoder();

export function checkRuntimeResult(d: { name: string; output_schema?: Record<string, unknown> | null }, result: ToolResult): ToolResult {
  const tool = `tool "${d.name}"`;
  const failed = (text: string): ToolResult => ({ content: [{ type: "text", text }], is_error: true, unknown_outcome: true });
  if (!result.is_error && d.output_schema) {
    if (result.structured_content === undefined) return failed(`${tool} returned no structured_content although it declares an output_schema`);
    const problem = validateOutput(d.output_schema, result.structured_content);
    if (problem !== null) return failed(`${tool} returned structured_content that does not match its output_schema: ${problem}`);
  }
  const bytes = encoder.encode(JSON.stringify(result)).length;
  if (bytes > RUNTIME_RESULT_BYTES) return failed(`${tool} output exceeded the runtime tool result limit (${bytes} > ${RUNTIME_RESULT_BYTES})`);
  return result;
}
