/**
 * Shapes that travel unchanged from a harness or a tool to the event log: tool results
 * (docs/api.md "Tools"), usage and stop reasons (docs/api.md "Events"). Shared by the harness
 * protocol, the runner link and the objects.
 */
import { z } from "zod";

export const ContentItemSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("text"), text: z.string() }),
  z.strictObject({ type: z.literal("image"), data: z.string(), mime_type: z.string().min(1) }),
]);
export type ContentItem = z.infer<typeof ContentItemSchema>;

/** A tool result as the service records it (docs/api.md "Tools", event `tool.result`). */
export const ToolResultSchema = z.strictObject({
  content: z.array(ContentItemSchema),
  is_error: z.boolean().optional(),
  structured_content: z.unknown().optional(),
  unknown_outcome: z.boolean().optional(),
});
export type ToolResult = z.infer<typeof ToolResultSchema>;

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
