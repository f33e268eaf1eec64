/**
 * `svc-harness/1`: the stdio protocol between the runner-host and a harness process.
 * One module, used by both ends (runner-host `harness-process.ts` and the reference harness).
 * The protocol in prose, for harness authors: docs/harness-protocol.md.
 *
 * Wire shape, one JSON object per LF-terminated line (see `jsonl.ts`):
 * - runner-host → harness: commands `{id, op, ...}`; each gets exactly one response
 *   `{type:"response", id, ok:true, result}` or `{type:"response", id, ok:false, error:{code,message}}`.
 *   `result` is op-specific (`RESULT_SCHEMAS`); the client knows the op from the id it sent.
 * - harness → runner-host, unsolicited: `ready` (first line), per-session events carrying
 *   `session` and `turn`, and `fatal` (the harness is about to exit 2).
 * Every object is strict: an unknown field, an unknown `op`/`type` or a wrong type is a framing
 * violation, which ends the process (docs/harness-protocol.md "Transport").
 */
import * as z from "zod";
import { REASONING_EFFORTS } from "../../src/shared/api-schema.ts";
import { StopReasonSchema, ToolResultSchema, UsageSchema } from "../../src/shared/result-schema.ts";

/** Protocol version carried by `ready` and `init`. */
export const PROTOCOL_VERSION = 1;
/** Name of the native state format the reference harness writes (pi-agent-core messages). */
export const STATE_FORMAT = "pi-agent-core.messages";

const Id = z.string().min(1).max(256);
/** Longest session id and turn id a harness line may carry, UTF-16 units. */
export const MAX_ID_CHARS = 256;
const SessionId = z.string().min(1).max(MAX_ID_CHARS);
/** Longest tool call id, UTF-16 units: provider-chosen ids can be long (OpenAI Responses ids are about 450 chars). */
export const MAX_CALL_ID_CHARS = 4096;
const CallId = z.string().min(1).max(MAX_CALL_ID_CHARS);

// ---- shared pieces --------------------------------------------------------------------------

export { ContentItemSchema, ToolResultSchema, type ContentItem, type ToolResult } from "../../src/shared/result-schema.ts";

export const ToolSpecSchema = z.strictObject({
  name: z.string().min(1).max(64),
  description: z.string(),
  input_schema: z.record(z.string(), z.unknown()),
});
export type ToolSpec = z.infer<typeof ToolSpecSchema>;

/** Native records are opaque to the runner-host: it stores and replays them as they are. */
export const NativeRecordSchema = z.record(z.string(), z.unknown());
export type NativeRecord = z.infer<typeof NativeRecordSchema>;

export const NativeStateSchema = z.strictObject({
  format: z.string().min(1),
  v: z.number().int(),
  records: z.array(NativeRecordSchema),
});
export type NativeState = z.infer<typeof NativeStateSchema>;

export const ProviderConfigSchema = z.strictObject({
  key: z.string(),
  base_url: z.string().optional(),
  api: z.string().optional(),
});
export type ProviderConfig = z.infer<typeof ProviderConfigSchema>;

/** Reasoning effort as the API names it; omitted or empty means `off` (docs/api.md "Sessions"). */
export const EffortSchema = z.enum(["", ...REASONING_EFFORTS]);
export type Effort = z.infer<typeof EffortSchema>;

export { StopReasonSchema, UsageSchema, type StopReason, type Usage } from "../../src/shared/result-schema.ts";

// ---- commands (runner-host → harness) -------------------------------------------------------

export const InitCommandSchema = z.strictObject({
  id: Id,
  op: z.literal("init"),
  protocol: z.literal(PROTOCOL_VERSION),
  providers: z.record(z.string().min(1), ProviderConfigSchema),
  options: z
    .strictObject({
      max_retries: z.number().int().min(0).max(10).optional(),
      timeout_ms: z.number().int().positive().optional(),
      tool_execution: z.enum(["sequential", "parallel"]).optional(),
    })
    .optional(),
});
export const SetKeysCommandSchema = z.strictObject({
  id: Id,
  op: z.literal("set_keys"),
  providers: z.record(z.string().min(1), z.strictObject({ key: z.string() })),
});
export const OpenCommandSchema = z.strictObject({
  id: Id,
  op: z.literal("open"),
  session: SessionId,
  model: z.string().min(1).max(256),
  instructions: z.string().optional(),
  reasoning_effort: EffortSchema.optional(),
  tools: z.array(ToolSpecSchema),
  state: NativeStateSchema.optional(),
});
/**
 * A piece of a session's native state, sent before its `open` when the whole state would not fit
 * in one line (`max_line_bytes` of `ready`). The harness keeps the records, in order, and the next
 * `open` of that session starts from them followed by `open.state.records`.
 */
export const StatePartCommandSchema = z.strictObject({
  id: Id,
  op: z.literal("state_part"),
  session: SessionId,
  records: z.array(NativeRecordSchema).min(1),
});
export const RunCommandSchema = z.strictObject({
  id: Id,
  op: z.literal("run"),
  session: SessionId,
  turn: z.string().min(1).max(256),
  text: z.string(),
});
export const ToolResultCommandSchema = z.strictObject({
  id: Id,
  op: z.literal("tool_result"),
  session: SessionId,
  call_id: CallId,
  result: ToolResultSchema,
});
const sessionOp = <O extends string>(op: O) =>
  z.strictObject({ id: Id, op: z.literal(op), session: SessionId });
export const InterruptCommandSchema = sessionOp("interrupt");
export const ExportCommandSchema = sessionOp("export");
export const DetachCommandSchema = sessionOp("detach");
export const PingCommandSchema = z.strictObject({ id: Id, op: z.literal("ping") });
export const ShutdownCommandSchema = z.strictObject({ id: Id, op: z.literal("shutdown") });

export const CommandSchema = z.discriminatedUnion("op", [
  InitCommandSchema,
  SetKeysCommandSchema,
  StatePartCommandSchema,
  OpenCommandSchema,
  RunCommandSchema,
  ToolResultCommandSchema,
  InterruptCommandSchema,
  ExportCommandSchema,
  DetachCommandSchema,
  PingCommandSchema,
  ShutdownCommandSchema,
]);
export type Command = z.infer<typeof CommandSchema>;
export type CommandOp = Command["op"];
export type CommandOf<O extends CommandOp> = Extract<Command, { op: O }>;
/** A command as a caller writes it: the client assigns the correlation id. */
export type CommandInput<O extends CommandOp = CommandOp> = O extends CommandOp
  ? Omit<CommandOf<O>, "id">
  : never;

// ---- responses ------------------------------------------------------------------------------

export const ResolvedModelSchema = z.strictObject({
  provider: z.string(),
  id: z.string(),
  api: z.string(),
  context_window: z.number().int().nonnegative(),
});
export type ResolvedModel = z.infer<typeof ResolvedModelSchema>;

const Empty = z.strictObject({});
/** The `result` of a successful response, per op. */
export const RESULT_SCHEMAS = {
  init: z.strictObject({ engine: z.string(), catalog: z.string() }),
  set_keys: Empty,
  /** Records staged for the session so far. */
  state_part: z.strictObject({ records: z.number().int().positive() }),
  open: z.strictObject({
    model: ResolvedModelSchema,
    thinking_level: z.string(),
    records: z.number().int().nonnegative(),
  }),
  run: Empty,
  tool_result: Empty,
  interrupt: Empty,
  export: z.strictObject({ state: NativeStateSchema }),
  detach: Empty,
  ping: z.strictObject({ sessions: z.number().int(), running: z.number().int() }),
  shutdown: Empty,
} as const satisfies Record<CommandOp, z.ZodType>;
export type ResultOf<O extends CommandOp> = z.infer<(typeof RESULT_SCHEMAS)[O]>;

/**
 * Error codes of a failed response. `model_unavailable`/`effort_unsupported`/`invalid_state` come
 * from `open` and become `session.error service_error` with the harness message.
 */
export const ErrorCodeSchema = z.enum([
  "invalid_request",
  "not_initialized",
  "unknown_session",
  "unknown_call",
  "conflict",
  "model_unavailable",
  "effort_unsupported",
  "invalid_state",
  "internal",
]);
export type HarnessErrorCode = z.infer<typeof ErrorCodeSchema>;
export const ErrorBodySchema = z.strictObject({ code: ErrorCodeSchema, message: z.string() });
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

export const ResponseSchema = z.discriminatedUnion("ok", [
  z.strictObject({
    type: z.literal("response"),
    id: Id,
    ok: z.literal(true),
    result: z.record(z.string(), z.unknown()),
  }),
  z.strictObject({ type: z.literal("response"), id: Id, ok: z.literal(false), error: ErrorBodySchema }),
]);
export type Response = z.infer<typeof ResponseSchema>;
export type ResponseOf<O extends CommandOp> =
  | { type: "response"; id: string; ok: true; result: ResultOf<O> }
  | { type: "response"; id: string; ok: false; error: ErrorBody };

// ---- events (harness → runner-host) ---------------------------------------------------------

export const ReadyEventSchema = z.strictObject({
  type: z.literal("ready"),
  protocol: z.literal(PROTOCOL_VERSION),
  engine: z.string(),
  /** Longest line, in UTF-8 bytes, either end may send (fits a 4 MiB record; docs/harness-protocol.md). */
  max_line_bytes: z.number().int().positive(),
});
export type ReadyEvent = z.infer<typeof ReadyEventSchema>;

const turnEvent = <T extends string, S extends z.ZodRawShape>(type: T, shape: S) =>
  z.strictObject({ type: z.literal(type), session: SessionId, turn: z.string().min(1).max(MAX_ID_CHARS), ...shape });

export const AssistantDeltaEventSchema = turnEvent("assistant.delta", { text: z.string() });
export const AssistantMessageEventSchema = turnEvent("assistant.message", {
  text: z.string(),
  usage: UsageSchema,
  stop_reason: StopReasonSchema,
  /** Provider and model id the message really came from, to detect a fallback. */
  model: z.strictObject({ provider: z.string(), id: z.string() }),
  error: z.string().optional(),
});
export const ToolCallEventSchema = turnEvent("tool.call", {
  call: z.strictObject({ id: CallId, name: z.string(), arguments: z.record(z.string(), z.unknown()) }),
  /**
   * The harness answers this call itself and its `tool.result` follows: recorded, never run (a
   * tool the session lacks, arguments the model did not complete). Without it, a call of a tool
   * the session has is run by the service.
   */
  answered: z.literal(true).optional(),
});
export const ToolResultEventSchema = turnEvent("tool.result", { call_id: CallId, result: ToolResultSchema });
export const StateAppendEventSchema = turnEvent("state.append", { records: z.array(NativeRecordSchema) });
export const TurnEndEventSchema = turnEvent("turn.end", {
  status: z.enum(["completed", "interrupted", "failed"]),
  error: z
    .strictObject({ code: z.enum(["provider_error", "service_error", "conflict"]), message: z.string() })
    .optional(),
});
export const FatalEventSchema = z.strictObject({ type: z.literal("fatal"), message: z.string() });

export const SessionEventSchema = z.discriminatedUnion("type", [
  AssistantDeltaEventSchema,
  AssistantMessageEventSchema,
  ToolCallEventSchema,
  ToolResultEventSchema,
  StateAppendEventSchema,
  TurnEndEventSchema,
]);
export type SessionEvent = z.infer<typeof SessionEventSchema>;
export type AssistantDeltaEvent = z.infer<typeof AssistantDeltaEventSchema>;
export type TurnEndEvent = z.infer<typeof TurnEndEventSchema>;
export type FatalEvent = z.infer<typeof FatalEventSchema>;

/** Everything a harness may write on stdout. */
export const HarnessOutputSchema = z.discriminatedUnion("type", [
  ReadyEventSchema,
  FatalEventSchema,
  ...SessionEventSchema.options,
  ResponseSchema,
]);
export type HarnessOutput = z.infer<typeof HarnessOutputSchema>;
