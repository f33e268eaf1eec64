/**
 * The runner link: messages between a runner-host and the Worker's objects, one zod module used by
 * both ends.
 *
 * Control socket (runner-host ↔ RunnerPool, `CONTROL_PATH`): hello with the harnesses and capacity
 * it offers, status updates, attach orders.
 *
 * Link socket (runner-host ↔ one SessionObject, `LINK_PATH`): everything about one attached
 * session. Both directions number their messages (`seq`, from 1 per lease) except the live-only
 * ones (`delta`, `progress`) and acks. Each side acknowledges what it has applied; after a dropped
 * socket (a deploy, an object restart) the runner-host reconnects with the same lease, both sides
 * say what they last applied, and each resends the rest: a turn survives the blip and no event is
 * lost or doubled. A lease is granted per attachment; a socket with another lease is refused.
 *
 * Every message on both sockets is discriminated by `t` (as on the SSE relay's socket), kept short
 * because the link carries every delta of every turn.
 */
import * as z from "zod";
import { ID_PATTERN } from "./ids.ts";
import { StopReasonSchema, ToolResultSchema, UsageSchema } from "./result-schema.ts";

/**
 * Protocol version both ends must speak. A runner-host states it when it dials its control socket
 * and each session link (`?protocol=`); the Worker refuses another version with 409 and a message
 * naming both (2: the control socket also states its region; 3: `detached` says `shutdown`; 4:
 * `status` says how many attach orders it has handled, `attaches`; 5: session links state the
 * version too, so a refused runner-host runs no turn through a link it held).
 */
export const RUNNER_PROTOCOL = 5;

/** Path a runner-host dials for its control socket (WebSocket upgrade, runner secret as bearer). */
export const CONTROL_PATH = "/internal/runners/control";
/** Path of a session link: `?protocol=<n>&session=<object name>&lease=<n>&runner=<runner id>`. */
export const LINK_PATH = "/internal/runners/link";

/** Text a runner-host sends as a keepalive; the objects answer it without waking (auto-response). */
export const PING = "ping";
export const PONG = "pong";
/** Keepalive interval of the runner-host's sockets (control and session links), ms: well inside proxies' idle cut-offs (about 100 s at the edge). */
export const PING_MS = 20_000;
/**
 * A peer that sent nothing and answered no ping this long is gone, ms: two pings lost. The
 * runner-host judges the service by it, and a RunnerPool its runner-hosts (a frozen process, or a
 * partition that leaves the TCP connection open, never closes its socket).
 */
export const SILENT_AFTER_MS = 2 * PING_MS + 5_000;
/** How often a RunnerPool looks for silent runner-hosts while one holds sessions, ms. */
export const SILENCE_CHECK_MS = 15_000;

/**
 * WebSocket close code an object sends on a link whose lease is not (or no longer) valid: the
 * runner-host stops redialling and lets the session go. In the 4000-4999 range applications own;
 * 409 as in HTTP Conflict.
 */
export const LEASE_GONE_CLOSE_CODE = 4409;

const Hex32 = z.string().regex(ID_PATTERN);
const Seq = z.number().int().positive();
const Turn = Hex32;

// ── control ─────────────────────────────────────────────────────────────────────────────────

export const CapacitySchema = z.strictObject({
  /** Sessions this runner-host keeps warm (attached or cached) and its `limits.loaded`. */
  loaded: z.number().int().nonnegative(),
  loaded_limit: z.number().int().positive(),
  /**
   * Loaded sessions with no running turn: what it can drop to take a new one. A `status` is sent
   * when whether any is idle changes while `loaded` is at `loaded_limit` (the only time the pool
   * reads it) and after every attach order, not at every change of the count, so the pool may hold
   * a stale count; it has the right sign whenever the runner-host is at its limit. The pool counts
   * the orders a status has not counted yet (`attaches`) ahead: one more loaded, or at the limit
   * one fewer idle.
   */
  idle: z.number().int().nonnegative(),
});
export type Capacity = z.infer<typeof CapacitySchema>;

export const ControlUpSchema = z.discriminatedUnion("t", [
  z.strictObject({
    t: z.literal("hello"),
    protocol: z.literal(RUNNER_PROTOCOL),
    runner_id: Hex32,
    /** Random per process start: a new boot means the sessions it held are gone. */
    boot: Hex32,
    harnesses: z.array(z.string().min(1).max(64)),
    draining: z.boolean(),
    capacity: CapacitySchema,
  }),
  z.strictObject({
    t: z.literal("status"),
    draining: z.boolean(),
    capacity: CapacitySchema,
    /** Attach orders this control socket has handled (taken, refused or ignored) when the figures were taken. */
    attaches: z.number().int().nonnegative(),
  }),
  /**
   * Added by the runner-host side: an attach order it will not take, so the session need not wait
   * for a link that never comes. `full`: `limits.loaded` reached with nothing idle to drop (the
   * send that needed placement gets 429); `draining`: shutting down; `unknown_harness`: not offered.
   */
  z.strictObject({
    t: z.literal("attach_refused"),
    session: z.string().min(1),
    lease: Seq,
    reason: z.enum(["full", "draining", "unknown_harness"]),
  }),
]);
export type ControlUp = z.infer<typeof ControlUpSchema>;

export const ControlDownSchema = z.discriminatedUnion("t", [
  z.strictObject({ t: z.literal("welcome"), pool: z.string() }),
  /** Open a link to this session with this lease. */
  z.strictObject({ t: z.literal("attach"), session: z.string().min(1), lease: Seq, harness: z.string() }),
]);
export type ControlDown = z.infer<typeof ControlDownSchema>;

// ── link: object → runner-host ─────────────────────────────────────────────────────────────

export const ToolDescriptorSchema = z.strictObject({
  name: z.string(),
  description: z.string(),
  input_schema: z.record(z.string(), z.unknown()),
  output_schema: z.record(z.string(), z.unknown()).optional(),
});

export const ProviderGrantSchema = z.strictObject({
  prefix: z.string().min(1),
  key: z.string(),
  base_url: z.string().optional(),
  api: z.string().optional(),
});
export type ProviderGrant = z.infer<typeof ProviderGrantSchema>;

/**
 * How the runner-host handles one tool of a binding: `runtime` tools are served by an executor
 * through the object (the runner-host validates the arguments, announces the call and waits for
 * `tool_reply`); host tools of a binding get `parameters` merged into their arguments, and, with
 * `credential`, ask the object for the session's override at call time (`credential` messages).
 */
export const ToolRouteSchema = z.strictObject({
  tool: z.string(),
  alias: z.string(),
  runtime: z.boolean(),
  credential: z.boolean(),
  parameters: z.record(z.string(), z.unknown()).optional(),
});
export type ToolRoute = z.infer<typeof ToolRouteSchema>;

/** A credential override as the tool call uses it: a bearer token, or request headers. */
export const CredentialValueSchema = z.union([z.string(), z.strictObject({ headers: z.record(z.string(), z.string()) })]);
export type CredentialValue = z.infer<typeof CredentialValueSchema>;

export const LinkDownSchema = z.discriminatedUnion("t", [
  /** First message of a lease: what to open. Native records follow in `native` messages. */
  z.strictObject({
    t: z.literal("open"),
    seq: Seq,
    session_id: Hex32,
    tenant: z.string(),
    harness: z.string(),
    model: z.string(),
    instructions: z.string().optional(),
    reasoning_effort: z.string().optional(),
    tools: z.array(ToolDescriptorSchema),
    provider: ProviderGrantSchema,
    /** Number of `native` messages that complete the restored state (0 for a new session). */
    native_parts: z.number().int().nonnegative(),
    /** Tools that belong to a binding (absent: none do). */
    routes: z.array(ToolRouteSchema).optional(),
  }),
  z.strictObject({ t: z.literal("native"), seq: Seq, records: z.array(z.unknown()) }),
  z.strictObject({
    t: z.literal("run"),
    seq: Seq,
    turn: Turn,
    text: z.string(),
    traceparent: z.string().optional(),
    /** When the message was accepted (ms since epoch): svc.input.queue_delay. */
    accepted_at: z.number(),
    /** The provider key as of now: a changed key recycles an idle harness process first. */
    provider: ProviderGrantSchema,
  }),
  z.strictObject({ t: z.literal("interrupt"), seq: Seq, turn: Turn }),
  /** An executor's result for a runtime call (or its unknown outcome when the executor was lost). */
  z.strictObject({ t: z.literal("tool_reply"), seq: Seq, call_id: Hex32, result: ToolResultSchema }),
  /**
   * Not numbered and never stored: the answer to an up `credential`, decrypted when asked. Lost
   * with a dropped socket; the runner-host asks again after reconnecting.
   */
  z.strictObject({ t: z.literal("credential"), call_id: Hex32, value: CredentialValueSchema.optional(), error: z.string().optional() }),
  /** Let go of this session (resume, restore, close): the link closes after `detached`. */
  z.strictObject({ t: z.literal("detach"), seq: Seq, reason: z.string() }),
  z.strictObject({ t: z.literal("ack"), up: z.number().int().nonnegative() }),
]);
export type LinkDown = z.infer<typeof LinkDownSchema>;

// ── link: runner-host → object ─────────────────────────────────────────────────────────────

/** Up messages that are numbered (`seq`), kept until acked and resent after a reconnect. */
const NumberedUpSchemas = [
  z.strictObject({ t: z.literal("opened"), seq: Seq }),
  z.strictObject({ t: z.literal("open_failed"), seq: Seq, message: z.string() }),
  z.strictObject({
    t: z.literal("assistant"),
    seq: Seq,
    turn: Turn,
    text: z.string(),
    usage: UsageSchema,
    stop_reason: StopReasonSchema,
  }),
  /** `call.id` is minted by the runner-host (32 hex) and is also the `tool.call` event id. */
  z.strictObject({
    t: z.literal("tool_call"),
    seq: Seq,
    turn: Turn,
    call: z.strictObject({ id: Hex32, name: z.string(), arguments: z.unknown() }),
    /** False when the call was refused before dispatch (unknown tool, schema error). */
    dispatched: z.boolean(),
  }),
  z.strictObject({ t: z.literal("tool_result"), seq: Seq, turn: Turn, call_id: Hex32, result: ToolResultSchema }),
  /** Native state records appended by the harness, in order. */
  z.strictObject({ t: z.literal("native"), seq: Seq, records: z.array(z.unknown()) }),
  z.strictObject({
    t: z.literal("turn_end"),
    seq: Seq,
    turn: Turn,
    status: z.enum(["completed", "interrupted", "failed"]),
    error: z.strictObject({ code: z.enum(["provider_error", "service_error", "conflict"]), message: z.string() }).optional(),
  }),
  /**
   * The runner-host let go of the session (idle eviction, harness crash, shutdown). `yielded`: it let
   * go of an idle session to make room (`limits.loaded`) and started no turn after deciding to, so a
   * turn the object began meanwhile (its `run` crossed the decision) never ran: it is queued again.
   * `shutdown`: it is shutting down, so input still queued ends as a shutdown ends it (docs/api.md
   * "Turns": interrupted, each queued input with `conflict`), not at the next placement.
   */
  z.strictObject({ t: z.literal("detached"), seq: Seq, reason: z.string(), yielded: z.literal(true).optional(), shutdown: z.literal(true).optional() }),
] as const;
export const NumberedUpSchema = z.discriminatedUnion("t", [...NumberedUpSchemas]);
export type NumberedUp = z.infer<typeof NumberedUpSchema>;

/** Live-only, not numbered: lost deltas are not resent (the assistant message carries all). */
const DeltaSchema = z.strictObject({ t: z.literal("delta"), turn: Turn, text: z.string() });
const ProgressSchema = z.strictObject({ t: z.literal("progress"), turn: Turn, call_id: Hex32, data: z.unknown() });
/** The last down `seq` the runner-host applied (cumulative). */
const AckUpSchema = z.strictObject({ t: z.literal("ack"), down: z.number().int().nonnegative() });

/** What a `batch` frame may carry: numbered messages, live ones and acks. */
export const BatchItemSchema = z.discriminatedUnion("t", [...NumberedUpSchemas, DeltaSchema, ProgressSchema, AckUpSchema]);
export type BatchItem = z.infer<typeof BatchItemSchema>;

/** Most messages one `batch` frame carries. */
export const MAX_BATCH = 64;

export const LinkUpSchema = z.discriminatedUnion("t", [
  /** First message on every (re)connected socket: the last down `seq` it applied. */
  z.strictObject({ t: z.literal("hello"), down: z.number().int().nonnegative() }),
  ...NumberedUpSchemas,
  /**
   * Several messages in one frame, in the order they were sent: what the runner-host sent in one
   * turn of its event loop (a turn's last delta, `assistant`, `native` and `turn_end`; a resend
   * after a reconnect; an ack riding along). Numbered ones keep their own seqs, consecutive and
   * ascending, so duplicates work message by message; the object applies the frame in one
   * transaction, publishes it in one push and acks its last seq once.
   */
  z.strictObject({
    t: z.literal("batch"),
    msgs: z
      .array(BatchItemSchema)
      .min(2)
      .max(MAX_BATCH)
      .refine((ms) => {
        const seqs = ms.flatMap((m) => ("seq" in m ? [m.seq] : []));
        return seqs.every((n, i) => i === 0 || n === seqs[i - 1]! + 1);
      }, "msgs: the numbered messages' seqs must be consecutive and ascending"),
  }),
  DeltaSchema,
  ProgressSchema,
  AckUpSchema,
  /** Not numbered: asks for the session's credential override for this open host-tool call. */
  z.strictObject({ t: z.literal("credential"), call_id: Hex32 }),
]);
export type LinkUp = z.infer<typeof LinkUpSchema>;

/**
 * Parses one up frame. A lone `delta` with exactly its three keys and valid values is taken
 * without zod: it is the frame a turn's first output arrives in, and the one the object sees
 * most. Anything else, every malformed delta included, goes through LinkUpSchema, which names
 * the problem.
 */
export function parseLinkUp(text: string): { success: true; data: LinkUp } | { success: false } {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { success: false };
  }
  if (isPlainDelta(v)) return { success: true, data: v };
  const r = LinkUpSchema.safeParse(v);
  return r.success ? { success: true, data: r.data } : { success: false };
}

function isPlainDelta(v: unknown): v is Extract<LinkUp, { t: "delta" }> {
  if (typeof v !== "object" || v === null || (v as { t?: unknown }).t !== "delta") return false;
  const { turn, text } = v as { turn?: unknown; text?: unknown };
  let keys = 0;
  for (const _ in v) keys++;
  return keys === 3 && typeof text === "string" && typeof turn === "string" && ID_PATTERN.test(turn);
}
