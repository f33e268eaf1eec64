/**
 * Shapes that travel unchanged from a harness or a tool to the event log: tool results
 * (docs/api.md "Tools"), usage and stop reasons (docs/api.md "Events"). Shared by the harness
 * protocol, the runner link and the objects.
 */
import * as z from "zod";

/** Standard base64 with padding, as the `image` item's `data` is (docs/api.md "Tools"). */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** `type/subtype` of RFC 6838's restricted names (parameters, if any, after `;`). */
const MIME = /^[A-Za-z0-9][\w!#$&^.+-]*\/[A-Za-z0-9][\w!#$&^.+-]*(?:\s*;.*)?$/;

// The `.meta()` below states in the OpenAPI document what `resultProblem` checks with its own
// messages where a result first reaches the service (a host tool's answer, an executor's reply, a
// call the harness answers itself); the schemas themselves stay structural, as results travel the
// link and the harness protocol already checked.
export const ContentItemSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("text"), text: z.string() }),
  z.strictObject({
    type: z.literal("image"),
    data: z.string().meta({ minLength: 1, pattern: BASE64.source }),
    mime_type: z.string().min(1).meta({ pattern: MIME.source }),
  }),
]);
export type ContentItem = z.infer<typeof ContentItemSchema>;

/** A tool result as the service records it (docs/api.md "Tools", event `tool.result`). */
export const ToolResultSchema = z
  .strictObject({
    content: z.array(ContentItemSchema),
    is_error: z.boolean().optional(),
    structured_content: z.unknown().optional(),
    unknown_outcome: z.boolean().optional(),
  })
  .meta({
    // `unknown_outcome` is for an error result only.
    if: { properties: { unknown_outcome: { const: true } }, required: ["unknown_outcome"] },
    then: { properties: { is_error: { const: true } }, required: ["is_error"] },
  });
export type ToolResult = z.infer<typeof ToolResultSchema>;

/**
 * An image's `data` must be base64 and its `mime_type` a media type, or a model provider would
 * fail the turn on it later (MCP results are built from the server's own form, then checked with
 * this). Null when it holds.
 */
export function imageProblem(r: ToolResult): string | null {
  for (const [i, c] of r.content.entries()) {
    if (c.type !== "image") continue;
    if (c.data === "") return `content[${i}].data: empty`;
    if (!BASE64.test(c.data)) return `content[${i}].data: not base64`;
    if (!MIME.test(c.mime_type)) return `content[${i}].mime_type: not a media type (type/subtype)`;
  }
  return null;
}

/**
 * What a result must also hold wherever it reaches the service (a host tool's answer, an
 * executor's reply, a call the harness answers itself): `unknown_outcome` only on an error result,
 * and well-formed images. Null when it holds.
 */
export function resultProblem(r: ToolResult): string | null {
  if (r.unknown_outcome === true && r.is_error !== true) return "unknown_outcome is for an error result (is_error true)";
  return imageProblem(r);
}

export const UsageSchema = z.strictObject({
  input_tokens: z.number().int().nonnegative(),
  output_tokens: z.number().int().nonnegative(),
  cache_read_tokens: z.number().int().nonnegative(),
  cache_write_tokens: z.number().int().nonnegative(),
  total_tokens: z.number().int().nonnegative(),
});
export type Usage = z.infer<typeof UsageSchema>;

export const StopReasonSchema = z.enum(["stop", "length", "tool_use", "error", "aborted"]);
export type StopReason = z.infer<typeof StopReasonSchema>;
