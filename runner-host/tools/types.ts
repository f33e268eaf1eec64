/**
 * Shapes of one host tool call as the runner-host executes it: the request coming from the turn,
 * the per-call context, and the spec `Result` that every outcome turns into (spec "Result,
 * Content, ToolResult, Call"; "Errors › Tool errors").
 */
import type { ToolBinding } from "../../src/shared/config-schema.ts";

/** Spec Content: a `text` item or an `image` item (base64 `data` plus `mime_type`). */
export type ToolContent = { type: "text"; text: string } | { type: "image"; data: string; mime_type: string };

/** Spec Result. `unknown_outcome: true` means the remote effect may have happened. */
export type ToolResult = {
  content: ToolContent[];
  is_error?: boolean;
  structured_content?: unknown;
  unknown_outcome?: boolean;
};

/** Spec ToolScope: sent to tools that enable session inspection. */
export type ToolScope = {
  tenant_id: string;
  session_id: string;
  call_id: string;
  service_url?: string;
  inspection_token?: string;
};

export type ToolCallRequest = {
  /** The `tool.call` event's `id` (docs/api.md "Tools"). */
  call_id: string;
  tool: string;
  arguments: unknown;
  scope?: ToolScope;
};

export type ToolCallContext = {
  /** W3C traceparent of the turn; forwarded when well-formed (spec "Operational behaviour"). */
  traceparent?: string;
  /** Aborted when the turn is interrupted. */
  signal: AbortSignal;
  /** Receives each progress frame (HTTP `event: progress` data, or an MCP progress notification). */
  onProgress(data: unknown): void;
  /** A per-session credential override (string form); replaces the `token_env` bearer. */
  bearer?: string;
  /** A per-session credential override (`{"headers": {...}}` form); replaces the `token_env` bearer. */
  headers?: Record<string, string>;
};

/**
 * A host configuration `tools` entry after parsing (spec "Tool binding (host tools entry)"):
 * `transport` is resolved, `token_env` and `mcp_tool` are "" when unset, `output_schema` is null
 * when unset. The schema that produces it lives in the shared config module.
 */
export type HostTool = ToolBinding;

/** Environment the bearer tokens are read from at call time (`process.env` in production). */
export type ToolEnv = Record<string, string | undefined>;
