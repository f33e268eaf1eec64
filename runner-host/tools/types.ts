/**
 * Shapes of one host tool call as the runner-host executes it: the request coming from the turn
 * and the per-call context. The tool (`HostTool`) is the parsed host configuration
 * entry (src/shared/config-tools.ts); every outcome becomes a Result (`ToolResult`,
 * src/shared/result-schema.ts).
 */

/** ToolScope (docs/api.md "Tools"): sent to tools that enable session inspection. */
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
  /** W3C traceparent of the turn; forwarded when well-formed (docs/api.md "Tools"). */
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

/** Environment the bearer tokens are read from at call time (`process.env` in production). */
export type ToolEnv = Record<string, string | undefined>;
