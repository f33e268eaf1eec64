/**
 * Executors (spec "Executors", "Executor objects"): the registration body, the Reply an executor
 * sends, the Commands it receives, and the RPC WebSocket's subprotocols. One module for both ends:
 * the Worker and ExecutorObject parse replies with it, the test executors build them from it.
 *
 * Command stream frames are `event: <type>` + `data: <Command JSON>` with no `id:` (commands are
 * never replayed). On the RPC WebSocket every Command and every Reply is one JSON text message; a
 * reply that fails is answered with `{"error":{"code","message"},"call_id"}`.
 */
import { z } from "zod";
import { ToolSchema } from "./api-schema.ts";
import { ToolResultSchema, type ToolResult } from "./result-schema.ts";
import { externalRefs, TOOL_NAME_PATTERN } from "./config-tools.ts";
import { ID_ANY_CASE_PATTERN, ID_PATTERN } from "./ids.ts";

/** The subprotocol the server echoes on the RPC upgrade. */
export const RPC_SUBPROTOCOL = "svc-rpc";
/** Prefix of the subprotocol that carries the executor token; never echoed. */
export const AUTH_SUBPROTOCOL_PREFIX = "svc-auth.";

/** Executor tokens: 32 random bytes as lowercase hex (an RFC 7230 token, safe as a subprotocol). */
export const EXECUTOR_TOKEN = /^[a-f0-9]{64}$/;

/** A binding alias: the same bounds as `ToolBinding.alias` in a session config. */
export const ALIAS_MAX_CHARS = 64;

/** A runtime tool descriptor: a spec Tool whose name the model can call. */
export const RuntimeToolSchema = ToolSchema.extend({
  name: z.string().regex(TOOL_NAME_PATTERN, { error: "must start with a letter and contain only letters, digits and _ (at most 64 characters)" }),
  input_schema: z
    .record(z.string(), z.unknown())
    .refine((s) => s.type === "object", { error: 'must be a JSON Schema with "type": "object" (tool arguments are an object)' })
    .refine((s) => externalRefs(s).length === 0, { error: "external $ref URLs are not allowed; only references starting with # are" }),
  output_schema: z
    .record(z.string(), z.unknown())
    .refine((s) => externalRefs(s).length === 0, { error: "external $ref URLs are not allowed; only references starting with # are" })
    .optional(),
});

export const ExecutorRegistrationSchema = z.strictObject({
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
});
export type ExecutorRegistration = z.infer<typeof ExecutorRegistrationSchema>;

export type ExecutorCredential = { id: string; token: string };

/** Spec Reply: exactly one of `progress` and `result`. */
export const ReplySchema = z
  .strictObject({
    connection: z.string().regex(ID_PATTERN, { error: "must be the connection of a ready command" }),
    call_id: z.string().regex(ID_PATTERN, { error: "must be the call_id of a call command" }),
    progress: z.unknown().optional(),
    result: ToolResultSchema.optional(),
  })
  .refine((r) => (r.progress === undefined) !== (r.result === undefined), {
    error: "a reply carries exactly one of progress and result",
  });
export type Reply = z.infer<typeof ReplySchema>;

/** Spec ToolScope as sent with every `call`. */
export type CallScope = { tenant_id: string; session_id: string; call_id: string };

export type Command =
  | { type: "ready"; connection: string }
  | { type: "call"; connection: string; call_id: string; tool: string; arguments: unknown; scope: CallScope }
  | { type: "cancel"; connection: string; call_id: string };

/** A failed reply on the RPC socket. */
export type RpcError = { error: { code: string; message: string }; call_id?: string };

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
  scope: CallScope;
  /** The SessionObject to answer (its object name). */
  session: string;
  /** Decrypted override for this call only: attached to the command as it is sent, never stored. */
  credential?: unknown;
};

/** `result` present: the call ended at once (no executor to send it to); absent: it was sent. */
export type Dispatched = { result?: ToolResult };

/** What a session needs to know about an executor it names (create, rebinding). */
export type ExecutorInfo = { tenant: string; binding: string; tools: z.infer<typeof RuntimeToolSchema>[]; closed: boolean };
