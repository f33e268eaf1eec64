/**
 * One session of the reference harness: one pi-agent-core `Agent`, its delegated tool calls, and
 * the mapping of Agent events to `svc-harness/1` session events.
 *
 * Invariants:
 * - Native state = `agent.state.messages`. Every message that enters it is sent as exactly one
 *   `state.append` record, in order, so the concatenated appends (after the restored records)
 *   always equal an `export`.
 * - Model, instructions, effort and tools come from the `open` command, never from native state.
 * - A turn ends with exactly one `turn.end`; events of a turn are written after the `run` response.
 */
import { createHash } from "node:crypto";
import { Agent, type AgentEvent, type AgentMessage } from "@mariozechner/pi-agent-core";
import { parseJsonWithRepair, streamSimple, type Api, type AssistantMessage, type Model } from "@mariozechner/pi-ai";
import { STATE_FORMAT, type CommandOf, type NativeState, type SessionEvent, type ToolResult } from "../harness/protocol.ts";
import { DEFAULT_MAX_LINE_BYTES } from "../harness/jsonl.ts";
import { MAX_JSON_DEPTH } from "../../src/shared/json-text.ts";
import { nestsDeeper } from "../../src/shared/json-values.ts";
import { effortReachesWire } from "./effort-wire.ts";
import { deltaPieces, fitCallIds, MAX_DELTA_CHARS, oversizeLine } from "./line-limits.ts";
import { CommandError, effortUnsupported, resolveEffort, resolveModel, splitModelRef, supportedEfforts } from "./model.ts";
import { makeAgentTools, PendingCalls, toServiceContent, withRealSchemas, type ToolDetails } from "./tools.ts";

/** System prompt when the session has no instructions (`config.instructions` omitted). */
export const DEFAULT_INSTRUCTIONS = "You are a helpful assistant.";
const NATIVE_ROLES = new Set(["user", "assistant", "toolResult"]);

type OpenCommand = CommandOf<"open">;
type EventBody = SessionEvent extends infer E ? (E extends SessionEvent ? Omit<E, "session" | "turn"> : never) : never;

/** Per-process settings from `init.options`. */
export interface RuntimeOptions {
  maxRetries: number;
  timeoutMs?: number;
  toolExecution: "sequential" | "parallel";
}

export interface SessionHost {
  emit(event: SessionEvent): void;
  keyFor(prefix: string): string | undefined;
  options: RuntimeOptions;
  providers: Parameters<typeof resolveModel>[1];
}

export class Session {
  readonly id: string;
  readonly model: Model<Api>;
  readonly thinkingLevel: string;
  readonly agent: Agent;
  #host: SessionHost;
  #calls = new PendingCalls();
  #schemas: Map<string, Record<string, unknown>>;
  #turn?: string;
  #interrupted = false;
  #internalError?: string;
  #appended: number;
  /** call ids that reached the service; any other finished call was answered by pi itself. */
  #dispatched = new Set<string>();
  #argsById = new Map<string, Record<string, unknown>>();
  /** The arguments text of each tool call of the message being streamed, by content index. */
  #rawArgs = new Map<number, string>();
  /**
   * A high surrogate that ended a text delta, held for the next one: a provider may split a
   * surrogate pair between two chunks, and each half alone would be recorded as U+FFFD.
   */
  #heldHigh = "";
  /**
   * Calls whose arguments text was no whole JSON object: pi would hand the tool `{}` for text it
   * cannot parse, and the completed part of a cut-off object; such a call is refused, not dispatched.
   */
  #badArgs = new Map<string, string>();
  /** The same, by content index, while the message streams (ids are fitted at its end). */
  #badArgsAt = new Map<number, string>();
  /** The current generation was started with an already-aborted signal: it never reached the provider. */
  #stillborn = false;
  /**
   * Whether the session's effort reaches the provider (effort-wire.ts), until a request has found it
   * does; asked at open, awaited before the first provider request so a turn never runs without it.
   */
  #effortCheck?: Promise<boolean | undefined>;

  constructor(cmd: OpenCommand, host: SessionHost) {
    this.id = cmd.session;
    this.#host = host;
    this.model = resolveModel(cmd.model, host.providers);
    const level = resolveEffort(this.model, cmd.reasoning_effort, cmd.model);
    this.thinkingLevel = level;
    if (level !== "off" && this.model.reasoning) this.#effortCheck = effortReachesWire(this.model, level);
    const records = restoreRecords(cmd.state);
    this.#appended = records.length;
    if (new Set(cmd.tools.map((t) => t.name)).size !== cmd.tools.length) {
      throw new CommandError("invalid_request", "tool names must be unique");
    }
    this.#schemas = new Map(cmd.tools.map((t) => [t.name, t.input_schema]));
    const prefix = splitModelRef(cmd.model).prefix;
    this.agent = new Agent({
      initialState: {
        systemPrompt: cmd.instructions || DEFAULT_INSTRUCTIONS,
        model: this.model,
        thinkingLevel: level,
        tools: makeAgentTools(cmd.tools, this.#calls, {
          dispatch: (id, name, args) => this.#dispatch(id, name, asObject(args)),
          refusal: (id) => this.#badArgs.get(id),
        }),
        messages: records,
      },
      // Providers use it as a prompt-cache key; a digest keeps our session id off the wire.
      sessionId: createHash("sha256").update(cmd.session).digest("hex").slice(0, 32),
      toolExecution: host.options.toolExecution,
      getApiKey: () => host.keyFor(prefix), // read per request, so set_keys applies to the next call
      streamFn: (model, context, options) => {
        const stream = () => {
          this.#stillborn = options?.signal?.aborted === true;
          return streamSimple(model, withRealSchemas(context, this.#schemas), {
            ...options,
            maxRetries: host.options.maxRetries, // no hidden SDK retries (docs/api.md "Events")
            ...(host.options.timeoutMs ? { timeoutMs: host.options.timeoutMs } : {}),
          });
        };
        return this.#effortCheck ? this.#afterEffortCheck(cmd.model, cmd.reasoning_effort || "off", stream) : stream();
      },
      afterToolCall: async ({ result }) =>
        (result.details as ToolDetails | undefined)?.is_error ? { isError: true } : undefined,
    });
    this.agent.subscribe((event) => {
      try {
        this.#onAgentEvent(event);
      } catch (err) {
        this.#internalError ??= (err as Error).message;
      }
    });
  }

  get running(): boolean {
    return this.#turn !== undefined;
  }

  /** Starts a turn. The caller has checked `running` and already written the `run` response. */
  run(turn: string, text: string): void {
    this.#turn = turn;
    this.#interrupted = false;
    this.#internalError = undefined;
    const start = this.agent.state.messages.length;
    this.agent.prompt(text).then(
      () => this.#endTurn(turn, start),
      (err: Error) => {
        this.#internalError ??= err.message;
        this.#endTurn(turn, start);
      },
    );
  }

  /** Fails the turn (`service_error`, docs/api.md "Sessions") when pi would not send the effort. */
  async #afterEffortCheck<T>(ref: string, wanted: string, stream: () => T): Promise<T> {
    if ((await this.#effortCheck) === false) {
      const sent = await Promise.all(
        supportedEfforts(this.model).map(async (e) => ((await effortReachesWire(this.model, resolveEffort(this.model, e, ref))) === false ? [] : [e])),
      );
      this.#internalError ??= effortUnsupported(wanted, ref, sent.flat()).message;
      throw new Error(this.#internalError);
    }
    this.#effortCheck = undefined;
    return stream();
  }

  toolResult(callId: string, result: ToolResult): void {
    if (!this.#calls.settle(callId, result)) {
      throw new CommandError("unknown_call", `no pending tool call ${JSON.stringify(callId)} in this session`);
    }
  }

  /** Aborts the stream and every pending tool wait; the turn ends `interrupted`. */
  interrupt(): void {
    if (!this.running) return;
    this.#interrupted = true;
    this.agent.abort();
  }

  exportState(): NativeState {
    return { format: STATE_FORMAT, v: 1, records: this.agent.state.messages as unknown as NativeState["records"] };
  }

  #emit(body: EventBody): void {
    if (this.#turn === undefined) return;
    const event = { ...body, session: this.id, turn: this.#turn } as SessionEvent;
    // Deltas are cut to fit where they are made; a turn's end is small.
    if (body.type !== "assistant.delta" && body.type !== "turn.end") {
      const bytes = oversizeLine(event);
      if (bytes !== undefined) {
        // Written, it would end the process and every session in it: this turn fails alone.
        this.#internalError ??= `the model's output made a ${body.type} line of ${bytes} bytes, over the ${DEFAULT_MAX_LINE_BYTES}-byte line limit of the harness protocol`;
        this.agent.abort();
        return;
      }
    }
    this.#host.emit(event);
  }

  #dispatch(callId: string, name: string, args: Record<string, unknown>): void {
    this.#dispatched.add(callId);
    this.#emit({ type: "tool.call", call: { id: callId, name, arguments: args } });
  }

  #onAgentEvent(event: AgentEvent): void {
    switch (event.type) {
      case "message_update": {
        const m = event.assistantMessageEvent;
        if (m.type === "text_delta") {
          let delta = this.#heldHigh + m.delta;
          const last = delta.charCodeAt(delta.length - 1);
          this.#heldHigh = last >= 0xd800 && last <= 0xdbff ? delta.slice(-1) : "";
          if (this.#heldHigh) delta = delta.slice(0, -1);
          if (delta === "") return;
          if (delta.length <= MAX_DELTA_CHARS) this.#emit({ type: "assistant.delta", text: delta });
          else for (const text of deltaPieces(delta)) this.#emit({ type: "assistant.delta", text });
        }
        else if (m.type === "start") this.#rawArgs.clear();
        else if (m.type === "toolcall_delta") this.#rawArgs.set(m.contentIndex, (this.#rawArgs.get(m.contentIndex) ?? "") + m.delta);
        else if (m.type === "toolcall_end") {
          const raw = this.#rawArgs.get(m.contentIndex) ?? "";
          this.#rawArgs.delete(m.contentIndex);
          const problem = argumentsProblem(raw);
          if (problem) this.#badArgsAt.set(m.contentIndex, `the arguments of this call to "${m.toolCall.name}" ${problem}; it was not run`);
        }
        return;
      }
      case "message_end":
        // A high surrogate no low one followed: it goes out as it is (recorded as U+FFFD).
        if (this.#heldHigh) this.#emit({ type: "assistant.delta", text: this.#heldHigh });
        this.#heldHigh = "";
        if (event.message.role === "assistant") {
          // Before pi runs the calls (it reads them from this very message after this event).
          fitCallIds(event.message);
          this.#dropDeepArguments(event.message);
          this.#badArgs = new Map(
            event.message.content.flatMap((c, i) => (c.type === "toolCall" && this.#badArgsAt.has(i) ? [[c.id, this.#badArgsAt.get(i)!] as const] : [])),
          );
          this.#badArgsAt.clear();
        }
        if (event.message.role === "assistant" && !(this.#stillborn && event.message.stopReason === "aborted")) {
          this.#emit(assistantMessage(event.message));
        }
        return this.#appendNew();
      case "tool_execution_start":
        this.#argsById.set(event.toolCallId, asObject(event.args));
        return;
      case "tool_execution_end": {
        const args = this.#argsById.get(event.toolCallId) ?? {};
        this.#argsById.delete(event.toolCallId);
        if (this.#dispatched.delete(event.toolCallId)) return;
        // pi answered this call itself (unknown tool name, arguments refused here): the service
        // records the pair and runs nothing.
        const id = event.toolCallId;
        this.#emit({ type: "tool.call", call: { id, name: event.toolName, arguments: args }, answered: true });
        const content = toServiceContent(event.result?.content);
        this.#emit({ type: "tool.result", call_id: id, result: { content, is_error: event.isError } });
        return;
      }
      default:
        return;
    }
  }

  /**
   * Arguments nested deeper than a request body may be (the model's, whatever it streamed) are
   * refused, and replaced by `{}` in the message: kept, they would be in the native record and the
   * `tool.call`, lines past the protocol's nesting bound that would end the process.
   */
  #dropDeepArguments(message: AssistantMessage): void {
    message.content.forEach((c, i) => {
      if (c.type !== "toolCall" || !nestsDeeper(c.arguments, MAX_JSON_DEPTH)) return;
      c.arguments = {};
      this.#badArgsAt.set(i, `the arguments of this call to "${c.name}" nest deeper than ${MAX_JSON_DEPTH} levels; it was not run`);
    });
  }

  /** state.append for every message not yet sent, one record per message. */
  #appendNew(): void {
    const messages = this.agent.state.messages;
    for (; this.#appended < messages.length; this.#appended++) {
      this.#emit({ type: "state.append", records: [messages[this.#appended] as unknown as Record<string, unknown>] });
    }
  }

  #endTurn(turn: string, start: number): void {
    // pi pushes a failure message without `message_end` when the loop throws; log it too.
    this.#appendNew();
    const end = this.#classify(start);
    this.#dispatched.clear();
    this.#argsById.clear();
    this.#badArgs.clear();
    this.#badArgsAt.clear();
    this.#rawArgs.clear();
    this.#emit({ type: "turn.end", ...end });
    if (this.#turn === turn) this.#turn = undefined;
  }

  #classify(start: number): Pick<Extract<SessionEvent, { type: "turn.end" }>, "status" | "error"> {
    if (this.#interrupted) return { status: "interrupted", error: { code: "conflict", message: "the turn was interrupted" } };
    if (this.#internalError) return { status: "failed", error: { code: "service_error", message: this.#internalError } };
    const last = lastAssistant(this.agent.state.messages.slice(start));
    if (last && (last.stopReason === "error" || last.stopReason === "aborted")) {
      return { status: "failed", error: { code: "provider_error", message: last.errorMessage || "provider request failed" } };
    }
    return { status: "completed" };
  }
}

function restoreRecords(state: OpenCommand["state"]): AgentMessage[] {
  if (!state) return [];
  if (state.format !== STATE_FORMAT || state.v !== 1) {
    throw new CommandError("invalid_state", `native state must be ${STATE_FORMAT} v1, got ${state.format} v${state.v}`);
  }
  state.records.forEach((r, i) => {
    if (!NATIVE_ROLES.has(r.role as string)) throw new CommandError("invalid_state", `record ${i} has no known role`);
  });
  return state.records as unknown as AgentMessage[];
}

/**
 * Why a tool call's streamed arguments text is no whole JSON object, or undefined when it is one (or
 * empty: a call without arguments). pi's own repair of string literals (raw control characters,
 * stray backslashes) is allowed; a cut-off object, text that is no JSON, or a non-object is not.
 */
export function argumentsProblem(raw: string): string | undefined {
  if (raw.trim() === "") return undefined;
  let value: unknown;
  try {
    value = parseJsonWithRepair(raw);
  } catch {
    return "are not complete JSON (cut off, or no JSON at all)";
  }
  return value !== null && typeof value === "object" && !Array.isArray(value) ? undefined : "are not a JSON object";
}

/** Tool arguments on the wire are an object; pi already turns unparsable JSON into `{}`. */
export function asObject(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function lastAssistant(messages: AgentMessage[]): AssistantMessage | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === "assistant") return m;
  }
  return undefined;
}

const STOP_REASONS = { stop: "stop", length: "length", toolUse: "tool_use", error: "error", aborted: "aborted" } as const;

function assistantMessage(m: AssistantMessage): EventBody {
  const count = (n: number) => (Number.isFinite(n) && n > 0 ? Math.round(n) : 0);
  return {
    type: "assistant.message",
    text: m.content.flatMap((c) => (c.type === "text" ? [c.text] : [])).join(""),
    // pi's `input` already excludes cache reads, as docs/api.md defines `input_tokens`.
    usage: {
      input_tokens: count(m.usage.input),
      output_tokens: count(m.usage.output),
      cache_read_tokens: count(m.usage.cacheRead),
      cache_write_tokens: count(m.usage.cacheWrite),
      total_tokens: count(m.usage.totalTokens),
    },
    stop_reason: STOP_REASONS[m.stopReason],
    model: { provider: m.provider, id: m.model },
    ...(m.errorMessage && (m.stopReason === "error" || m.stopReason === "aborted") ? { error: m.errorMessage } : {}),
  };
}
