/**
 * Session events as clients receive them (docs/api.md "Events"): one envelope per event type,
 * each with its own `data`. Retained types always carry `cursor`; the two live-only types never do, and
 * `user.message` never carries `input_id` (it is the input). The OpenAPI document, the typed client
 * and the SSE frame shapes are all built from these schemas.
 */
import * as z from "zod";
import { component, Cursor, DateTime, Hex32 } from "./contract-registry.ts";
import { ContentItemSchema, StopReasonSchema, ToolResultSchema, UsageSchema } from "./result-schema.ts";

export const SESSION_STATUSES = ["idle", "running", "interrupted", "failed", "closed"] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

/** The `session.error` codes this service emits: the whole list (docs/api.md "Events"). */
export const SESSION_ERROR_CODES = ["provider_error", "conflict", "service_error"] as const;

component("Content", ContentItemSchema, "One item of a tool result: `text`, or an `image` as base64 `data` with its `mime_type`.");
component("Result", ToolResultSchema, "A tool result. `unknown_outcome: true` means the failure came after dispatch.");
component("Usage", UsageSchema, "Token counts of one model generation step; `input_tokens` excludes cache reads.");

export const CallSchema = component(
  "Call",
  z.strictObject({ id: Hex32, name: z.string(), arguments: z.unknown() }),
  "A tool call as the model requested it. `id` is the `tool.call` event's id and the `call_id` tools receive.",
);
export const ToolResultDataSchema = component(
  "ToolResult",
  z.strictObject({ call_id: Hex32, result: ToolResultSchema }),
  "The outcome of one tool call.",
);

/** Envelope fields: retained events carry their cursor, live-only ones never do. */
const retained = { id: Hex32, time: DateTime, cursor: Cursor };
const live = { id: Hex32, time: DateTime };

export const UserMessageEventSchema = component(
  "UserMessageEvent",
  z.strictObject({
    ...retained,
    type: z.literal("user.message"),
    data: z.strictObject({ type: z.literal("user.message"), text: z.string(), delivery: z.literal("queue"), key: z.string().optional() }),
  }),
  "A message accepted by send. It is the input, so it has no `input_id`.",
);
export const AssistantDeltaEventSchema = component(
  "AssistantDeltaEvent",
  z.strictObject({ ...live, type: z.literal("assistant.delta"), input_id: Hex32, data: z.strictObject({ text: z.string() }) }),
  "Incremental assistant text. Live only: no cursor, never replayed.",
);
export const AssistantMessageEventSchema = component(
  "AssistantMessageEvent",
  z.strictObject({
    ...retained,
    type: z.literal("assistant.message"),
    input_id: Hex32,
    data: z.strictObject({ text: z.string(), usage: UsageSchema, stop_reason: StopReasonSchema }),
  }),
  "The end of one model generation step.",
);
export const ToolCallEventSchema = component(
  "ToolCallEvent",
  z.strictObject({ ...retained, type: z.literal("tool.call"), input_id: Hex32, data: CallSchema }),
  "The model requests a tool, recorded before dispatch.",
);
export const ToolProgressEventSchema = component(
  "ToolProgressEvent",
  z.strictObject({ ...live, type: z.literal("tool.progress"), input_id: Hex32, data: z.strictObject({ call_id: Hex32, data: z.unknown() }) }),
  "A progress frame of a running tool. Live only: no cursor, never replayed.",
);
export const ToolResultEventSchema = component(
  "ToolResultEvent",
  z.strictObject({ ...retained, type: z.literal("tool.result"), input_id: Hex32, data: ToolResultDataSchema }),
  "A tool call finished; every `tool.call` gets exactly one.",
);
export const SessionStatusEventSchema = component(
  "SessionStatusEvent",
  z.strictObject({ ...retained, type: z.literal("session.status"), input_id: Hex32.optional(), data: z.strictObject({ status: z.enum(SESSION_STATUSES) }) }),
  "Any status change. `input_id` is set at the start and end of a turn, absent on session-level changes.",
);
export const SessionErrorEventSchema = component(
  "SessionErrorEvent",
  z.strictObject({ ...retained, type: z.literal("session.error"), input_id: Hex32, data: z.strictObject({ code: z.enum(["provider_error", "conflict", "service_error"]), message: z.string() }) }),
  `A turn failed or a queued input was cancelled; a \`session.status\` follows. Codes: ${SESSION_ERROR_CODES.join(", ")}.`,
);

/** The event types the log keeps (with a cursor); the live-only ones follow in VARIANTS. */
const RETAINED_VARIANTS = [
  UserMessageEventSchema,
  AssistantMessageEventSchema,
  ToolCallEventSchema,
  ToolResultEventSchema,
  SessionStatusEventSchema,
  SessionErrorEventSchema,
] as const;
const VARIANTS = [...RETAINED_VARIANTS, AssistantDeltaEventSchema, ToolProgressEventSchema] as const;

export const EventSchema = component(
  "Event",
  z.discriminatedUnion("type", VARIANTS),
  "An event of a session. `cursor` is present on retained events only.",
);
/** An event as clients see it, narrowed by `type`. */
export type SessionEvent = z.output<typeof EventSchema>;

export const RetainedEventSchema = component(
  "RetainedEvent",
  z.discriminatedUnion("type", RETAINED_VARIANTS),
  "An event the log keeps (every type but `assistant.delta` and `tool.progress`); it always has a `cursor`.",
);

export const EventListSchema = component(
  "EventList",
  z.strictObject({ events: z.array(RetainedEventSchema), next_cursor: z.string() }),
  "A page of retained events. `next_cursor` is the last event's cursor, or the `after` sent when the page is empty.",
);

/**
 * One SSE frame (docs/api.md "SSE"): `event` is the event type, `data` its envelope, and `id`
 * the cursor — present exactly on retained events.
 */
export const SseEventFrameSchema = component(
  "SseEventFrame",
  z.union(
    VARIANTS.map((v) =>
      "cursor" in v.shape
        ? z.strictObject({ id: Cursor, event: v.shape.type, data: v })
        : z.strictObject({ event: v.shape.type, data: v }),
    ),
  ),
  "One frame of the event stream: `id: <cursor>` (retained events only), `event: <type>`, `data: <Event JSON>`, then a blank line. While idle a `: keepalive` comment frame arrives every 15 seconds.",
);
