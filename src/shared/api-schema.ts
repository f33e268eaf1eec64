/**
 * Request and response bodies of the HTTP interface (docs/api.md "The contract").
 * Requests are strict: unknown fields are `400 invalid_request`. Responses are described by the
 * same kind of schema: the service never parses them, but the OpenAPI document, the typed client
 * and the tests' response validation all come from here.
 */
import * as z from "zod";
import { component, DateTime, Hex32 } from "./contract-registry.ts";
import { ERROR_STATUS, type ErrorCode } from "./errors.ts";
import { SESSION_STATUSES, type SessionStatus } from "./event-schema.ts";
import { ID_ANY_CASE_PATTERN } from "./ids.ts";
import { CREDENTIAL_VALUE_JSON_SCHEMA } from "./credential-headers.ts";

export { SESSION_STATUSES, type SessionStatus };

/** Reasoning efforts, lowest first (docs/api.md "Sessions"); `""` (or omitted) in a request means `off`. */
export const REASONING_EFFORTS = ["off", "minimal", "low", "medium", "high", "xhigh", "max"] as const;
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

/** `config.model` is 1 to 256 characters (docs/api.md "Limits"). */
export const MAX_MODEL_CHARS = 256;

const jsonSchemaValue = z.record(z.string(), z.unknown());

export const ToolSchema = component(
  "Tool",
  z.strictObject({
    name: z.string().min(1),
    description: z.string().min(1),
    input_schema: jsonSchemaValue,
    output_schema: jsonSchemaValue.optional(),
  }),
  "A tool descriptor. `output_schema` applies to successful `structured_content` only.",
);
export type Tool = z.infer<typeof ToolSchema>;

export const ToolBindingSchema = component("ToolBinding", z.strictObject({
  alias: z.string().min(1).max(64),
  executor: z.string().regex(ID_ANY_CASE_PATTERN, "must be a 32-hex executor id").toLowerCase().optional(),
  operations: z.array(z.string().min(1)).optional(),
  // Checked at create with its own message (src/session/create.ts); stated here for the OpenAPI document.
  parameters: z.unknown().meta({ type: "object" }).optional(),
  provider: z.string().min(1).optional(),
  runtime: z.array(ToolSchema).optional(),
}), "A named group of tools in one session: executor-served `runtime` tools, or a host tool (`provider`) whose calls may use a private credential override.");
export type ToolBinding = z.infer<typeof ToolBindingSchema>;

export const SessionConfigSchema = component("SessionConfig", z.strictObject({
  model: z.string().min(1).max(MAX_MODEL_CHARS),
  tools: z.array(z.string()),
  instructions: z.string().optional(),
  reasoning_effort: z.union([z.enum(REASONING_EFFORTS), z.literal("")], { error: `must be one of ${REASONING_EFFORTS.join(", ")}, or empty` }).optional(),
  bindings: z.array(ToolBindingSchema).optional(),
}), "`model` is `provider/model`. Omitted or empty `reasoning_effort` means `off`.");
export type SessionConfig = z.infer<typeof SessionConfigSchema>;

export const CredentialInputSchema = component(
  "CredentialInput",
  z.strictObject({
    binding: z.string().min(1),
    // Checked at create with its own messages (src/session/credentials.ts); stated here for the OpenAPI document.
    value: z.unknown().meta(CREDENTIAL_VALUE_JSON_SCHEMA),
  }),
  "A private override for the binding `binding`: a bearer token string, or `{\"headers\": {name: value}}`. Stored encrypted; never returned.",
);

export const CreateSessionSchema = component(
  "CreateSession",
  z.strictObject({
    harness: z.string(),
    config: SessionConfigSchema,
    credentials: z.array(CredentialInputSchema).optional(),
  }),
  "The request of create.",
);
export type CreateSession = z.infer<typeof CreateSessionSchema>;

export const InputSchema = component(
  "Input",
  z.strictObject({
    type: z.enum(["user.message", "user.interrupt"]),
    text: z.string().optional(),
    key: z.string().min(1).max(256).optional(),
    // Any other value is a 400 with its own message (src/session/session-state.ts); `steer` is 422.
    delivery: z.string().meta({ enum: ["queue", "steer"] }).optional(),
  }),
  "The request of send. `text` is required for `user.message`; `key` is its idempotency key; `delivery` `queue` is accepted, `steer` is `422`.",
);
export type Input = z.infer<typeof InputSchema>;

/** Resume, close and flush take an empty body or `{}` (docs/api.md). */
export const EmptySchema = component("Empty", z.strictObject({}), "An empty object; the body may also be left out.");

export const RestoreSchema = component(
  "Restore",
  z.strictObject({ checkpoint: z.string().regex(ID_ANY_CASE_PATTERN, { error: "must be a 32-hex checkpoint id" }) }),
  "The checkpoint to restore: a checkpoint `id` (32 hex).",
);

export const CheckpointSchema = component(
  "Checkpoint",
  z.strictObject({ id: Hex32, offset: z.number().int().nonnegative(), time: DateTime }),
  "The last completed turn's checkpoint. `offset` is a byte offset into the session's NDJSON event history.",
);
export type Checkpoint = z.output<typeof CheckpointSchema>;

export const SessionSchema = component(
  "Session",
  z.strictObject({
    id: Hex32,
    harness: z.string(),
    config: SessionConfigSchema,
    status: z.enum(SESSION_STATUSES),
    created_at: DateTime,
    updated_at: DateTime,
    descriptors: z.array(ToolSchema),
    checkpoint: CheckpointSchema.optional(),
    credential_bindings: z.array(z.string()).optional(),
  }),
  "A session. `credential_bindings` lists the aliases that have private overrides; values never appear.",
);
export type Session = z.output<typeof SessionSchema>;

export const SessionListSchema = component(
  "SessionList",
  z.strictObject({ sessions: z.array(SessionSchema), next_after: Hex32.optional() }),
  "The caller's sessions in ascending id order. `next_after` is set when the page stopped before 8 MiB of sessions (short of `limit`, with more to come): the `after` of the next page.",
);
export type SessionList = z.output<typeof SessionListSchema>;

export const ToolCatalogSchema = component(
  "ToolCatalog",
  z.strictObject({ tools: z.array(ToolSchema) }),
  "The host tools the caller's tenant may enable. No urls, no credentials.",
);

export const StatusSchema = component("Status", z.strictObject({ status: z.string() }), "A status word.");
export type Status = z.output<typeof StatusSchema>;

export const ErrorResponseSchema = component(
  "ErrorResponse",
  z.strictObject({
    error: z.strictObject({ code: z.enum(Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]]), message: z.string().min(1) }),
    request_id: Hex32,
  }),
  "Every error. `request_id` equals the `X-Request-ID` header.",
);

/** The internal envelope the objects build and store; clients see it as `Event` (event-schema.ts). */
export type Event = {
  id: string;
  type: string;
  time: string;
  data: Record<string, unknown>;
  input_id?: string;
  cursor?: string;
};

export type EventList = { events: Event[]; next_cursor: string };

export const HealthSchema = component(
  "Health",
  z.strictObject({ status: z.enum(["ok", "ready", "not_ready"]) }),
  "`ok` while the server runs (live); `ready` or `not_ready` (ready).",
);
