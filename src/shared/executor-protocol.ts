/**
 * Executors (docs/api.md "Executors"): the registration body and the credential it
 * returns, the Commands an executor receives, the Replies it sends, and the RPC WebSocket's
 * subprotocols. The one statement of this contract: the Worker routes and the ExecutorObject parse
 * with these schemas, the OpenAPI document is generated from them (each is a named component),
 * and the typed client and the test executors build their messages from them.
 *
 * Command stream frames are `event: <type>` + `data: <Command JSON>` with no `id:` (commands are
 * never replayed). On the RPC WebSocket every Command and every Reply is one JSON text message; a
 * reply that fails is answered with `{"error":{"code","message"},"call_id"}`.
 */
import * as z from "zod";
import { ToolSchema } from "./api-schema.ts";
import { jsonSchema, TOOL_NAME_PATTERN } from "./config-tools.ts";
import { component, Hex32 } from "./contract-registry.ts";
import { ID_ANY_CASE_PATTERN, ID_PATTERN } from "./ids.ts";
import { resultProblem, ToolResultSchema, type ToolResult } from "./result-schema.ts";

/** The subprotocol the server echoes on the RPC upgrade. */
export const RPC_SUBPROTOCOL = "svc-rpc";
/** Prefix of the subprotocol that carries the executor token; never echoed. */
export const AUTH_SUBPROTOCOL_PREFIX = "svc-auth.";

/** Executor tokens: 32 random bytes as lowercase hex (an RFC 7230 token, safe as a subprotocol). */
export const EXECUTOR_TOKEN = /^[a-f0-9]{64}$/;

/** A binding alias: the same bounds as `ToolBinding.alias` in a session config. */
export const ALIAS_MAX_CHARS = 64;

/** A runtime tool descriptor: a Tool (name, description, schemas) whose name the model can call. */
export const RuntimeToolSchema = component(
  "RuntimeTool",
  ToolSchema.extend({
    name: z.string().regex(TOOL_NAME_PATTERN, { error: "must start with a letter and contain only letters, digits and _ (at most 64 characters)" }),
    input_schema: jsonSchema(true),
    output_schema: jsonSchema(false).optional(),
  }),
  'A Tool an executor serves. Its `name` is what the model calls (a letter, then letters, digits and `_`, at most 64); `input_schema` has `"type": "object"`; no external `$ref`; each schema must compile (valid `pattern`s, `$ref`s that resolve in the document, keywords of the right shape), as for host tools.',
);
export type RuntimeTool = z.output<typeof RuntimeToolSchema>;

export const ExecutorRegistrationSchema = component(
  "ExecutorRegistration",
  z.strictObject({
    binding: z.string().min(1).max(ALIAS_MAX_CHARS),
    tools: z
      .array(RuntimeToolSchema)
      .min(1, { error: "must list at least one tool" })
      .superRefine((tools, ctx) => {
        const seen = new Set<string>();
        tools.forEach((t, i) => {
          if (seen.has(t.name)) ctx.addIssue({ code: "custom", path: [i, "name"], message: `"${t.name}" is listed twice` });
          seen.add(t.name);
        });
      }),
    session: z.string().regex(ID_ANY_CASE_PATTERN, { error: "must be a 32-hex session id" }).optional(),
  }),
  "`binding` is the alias the executor serves and `tools` its descriptors (names unique). With `session`, the executor takes over that session's binding of the same alias (descriptors must be equal).",
);
export type ExecutorRegistration = z.output<typeof ExecutorRegistrationSchema>;

export const ExecutorCredentialSchema = component(
  "ExecutorCredential",
  z.strictObject({ id: Hex32, token: z.string().regex(EXECUTOR_TOKEN) }),
  "The executor id and its credential (64 hex characters, usable as a WebSocket subprotocol). Shown once.",
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
  "Who a tool call is for. An executor's `call` carries the three required fields; `service_url` and `inspection_token` reach only host tools configured with `inspect_session`.",
);
export type ToolScope = z.output<typeof ToolScopeSchema>;

export const ReadyCommandSchema = component(
  "ReadyCommand",
  z.strictObject({ type: z.literal("ready"), connection: Hex32 }),
  "First frame of every command stream: the identity replies must name.",
);
export const CallCommandSchema = component(
  "CallCommand",
  z.strictObject({
    type: z.literal("call"),
    connection: Hex32,
    call_id: Hex32,
    tool: z.string(),
    arguments: z.unknown(),
    scope: ToolScopeSchema,
  }),
  "Run a tool. Answer with replies carrying this `call_id`: any number of `progress`, then one `result`.",
);
export const CancelCommandSchema = component(
  "CancelCommand",
  z.strictObject({ type: z.literal("cancel"), connection: Hex32, call_id: Hex32 }),
  "The call ended without the executor's result (its turn interrupted, its session closed, the 300 s timeout, a shutdown); a later reply for it is refused.",
);

export const CommandSchema = component(
  "Command",
  z.discriminatedUnion("type", [ReadyCommandSchema, CallCommandSchema, CancelCommandSchema]),
  "A command to an executor.",
);
export type Command = z.output<typeof CommandSchema>;

/** A Reply: exactly one of `progress` and `result` (docs/api.md "Replies"). */
export const ReplySchema = component(
  "Reply",
  z
    .strictObject({
      connection: z.string().regex(ID_PATTERN, { error: "must be the connection of a ready command" }),
      call_id: z.string().regex(ID_PATTERN, { error: "must be the call_id of a call command" }),
      progress: z.unknown().optional(),
      result: ToolResultSchema.optional(),
    })
    .refine((r) => (r.progress === undefined) !== (r.result === undefined), {
      error: "a reply carries exactly one of progress and result",
    })
    // What any result must hold (`unknown_outcome` only on an error result, well-formed images).
    .superRefine((r, ctx) => {
      const problem = r.result && resultProblem(r.result);
      if (problem) ctx.addIssue({ code: "custom", message: problem, path: ["result"] });
    })
    // The first refinement, stated for the OpenAPI document.
    .meta({ oneOf: [{ required: ["progress"] }, { required: ["result"] }] }),
  "Progress or the result of one call (exactly one of the two), on the current connection. Stale, duplicate or unsolicited replies are `409 conflict`.",
);
export type Reply = z.output<typeof ReplySchema>;

/** A reply refused on the RPC socket: the error and the call it was about. */
export const RpcErrorSchema = component(
  "RpcError",
  z.strictObject({ error: z.strictObject({ code: z.string(), message: z.string() }), call_id: z.string().optional() }),
  "Sent on the RPC socket when a reply fails.",
);
export type RpcError = z.output<typeof RpcErrorSchema>;

/** One SSE frame of `GET /executors/{id}/commands`: `event` is the command type, never an `id:`. */
export const SseCommandFrameSchema = component(
  "SseCommandFrame",
  z.union(
    [ReadyCommandSchema, CallCommandSchema, CancelCommandSchema].map((c) => z.strictObject({ event: c.shape.type, data: c })),
  ),
  "One frame of the command stream: `event: <command type>`, `data: <Command JSON>`, no `id:` (commands are not replayable).",
);

/**
 * Reserved member of a `call` command's `arguments` that carries the session's private credential
 * override for the binding (a bearer string or `{"headers": {...}}`). Added at send time only.
 */
export const CREDENTIAL_ARGUMENT = "$credential";

/** What a SessionObject asks an ExecutorObject to run. */
export type Dispatch = {
  call_id: string;
  tool: string;
  arguments: Record<string, unknown>;
  /** Sent with the call as is; runtime calls carry no inspection token. */
  scope: Pick<ToolScope, "tenant_id" | "session_id" | "call_id">;
  /** The SessionObject to answer (its object name). */
  session: string;
  /** Decrypted override for this call only: attached to the command as it is sent, never stored. */
  credential?: unknown;
};

/** `result` present: the call ended at once (no executor to send it to); absent: it was sent. */
export type Dispatched = { result?: ToolResult };

/** What a session needs to know about an executor it names (create, rebinding). */
export type ExecutorInfo = { tenant: string; binding: string; tools: RuntimeTool[]; closed: boolean };
