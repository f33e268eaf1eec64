/**
 * Executors (spec "Executors", "Executor objects"): clients that serve runtime tools. One module
 * for both ends: the Worker validates registrations and replies with it, executor clients read
 * commands with it.
 *
 * Commands go to the executor as SSE frames (`event: <type>`, `data: <Command>`, no `id:`: commands
 * are not replayable) or as WebSocket text messages on the RPC socket. Replies come back over HTTP
 * or the same socket.
 */
import { z } from "zod";
import { ToolSchema } from "./api-schema.ts";
import { component, Hex32 } from "./contract-registry.ts";
import { ToolResultSchema } from "./result-schema.ts";

/** WebSocket subprotocols of `GET /executors/{id}/rpc`; the token rides in the second. */
export const RPC_PROTOCOL = "svc-rpc";
export const RPC_AUTH_PREFIX = "svc-auth.";

export const ExecutorRegistrationSchema = component(
  "ExecutorRegistration",
  z.strictObject({
    binding: z.string().min(1).max(64),
    tools: z.array(ToolSchema),
    session: Hex32.optional(),
  }),
  "`binding` is the alias the executor serves and `tools` its descriptors. With `session`, the executor takes over that session's binding of the same alias (descriptors must be equal).",
);
export type ExecutorRegistration = z.output<typeof ExecutorRegistrationSchema>;

export const ExecutorCredentialSchema = component(
  "ExecutorCredential",
  z.strictObject({ id: Hex32, token: z.string().regex(/^[a-f0-9]+$/) }),
  "The executor id and its credential (hex, usable as a WebSocket subprotocol). Shown once.",
);
export type ExecutorCredential = z.output<typeof ExecutorCredentialSchema>;

export const ToolScopeSchema = component(
  "ToolScope",
  z.strictObject({
    tenant_id: z.string(),
    session_id: Hex32,
    call_id: Hex32,
    service_url: z.string().optional(),
    inspection_token: z.string().optional(),
  }),
  "Who a tool call is for. `service_url` and `inspection_token` only for tools that inspect the session.",
);
export type ToolScope = z.output<typeof ToolScopeSchema>;

export const ReadyCommandSchema = component(
  "ReadyCommand",
  z.strictObject({ type: z.literal("ready"), connection: z.string().min(1) }),
  "First frame of every command stream: the identity replies must name.",
);
export const CallCommandSchema = component(
  "CallCommand",
  z.strictObject({
    type: z.literal("call"),
    connection: z.string().min(1),
    call_id: Hex32,
    tool: z.string(),
    arguments: z.unknown(),
    scope: ToolScopeSchema,
  }),
  "Run a tool. Answer with replies carrying this `call_id`: any number of `progress`, then one `result`.",
);
export const CancelCommandSchema = component(
  "CancelCommand",
  z.strictObject({ type: z.literal("cancel"), connection: z.string().min(1), call_id: Hex32 }),
  "The turn that made the call was interrupted; a later reply for it is refused.",
);

export const CommandSchema = component(
  "Command",
  z.discriminatedUnion("type", [ReadyCommandSchema, CallCommandSchema, CancelCommandSchema]),
  "A command to an executor.",
);
export type Command = z.output<typeof CommandSchema>;

export const ReplySchema = component(
  "Reply",
  z.strictObject({
    connection: z.string().min(1),
    call_id: Hex32,
    progress: z.unknown().optional(),
    result: ToolResultSchema.optional(),
  }),
  "Progress or the result of one call, on the current connection. Stale, duplicate or unsolicited replies are `409 conflict`.",
);
export type Reply = z.output<typeof ReplySchema>;

/** A reply refused on the RPC socket: the error and the call it was about. */
export const RpcErrorSchema = component(
  "RpcError",
  z.strictObject({ error: z.strictObject({ code: z.string(), message: z.string() }), call_id: z.string().optional() }),
  "Sent on the RPC socket when a reply fails.",
);

/** One SSE frame of `GET /executors/{id}/commands`: `event` is the command type, never an `id:`. */
export const SseCommandFrameSchema = component(
  "SseCommandFrame",
  z.union(
    [ReadyCommandSchema, CallCommandSchema, CancelCommandSchema].map((c) => z.strictObject({ event: c.shape.type, data: c })),
  ),
  "One frame of the command stream: `event: <command type>`, `data: <Command JSON>`, no `id:` (commands are not replayable).",
);
