/**
 * One turn of one session on the runner-host: from the object's `run` to `turn_end`.
 *
 * Maps harness events to link messages: `assistant.delta` → `delta` (coalesced),
 * `assistant.message` → `assistant`, `state.append` → `native`, `tool.call`/`tool.result` →
 * ./turn-tools.ts, `turn.end` → `turn_end`.
 * Invariants: exactly one `turn_end`, sent after every `tool_result` of the turn; an override
 * (shutdown, model fallback) decides the final status whatever the harness reports; a harness
 * that does not end an interrupted turn within `INTERRUPT_GRACE_MS` is killed.
 */
import type { TurnEndEvent, SessionEvent } from "./harness/protocol.ts";
import type { TurnSlot } from "./harness-pool.ts";
import { recordLineBytes } from "./harness/state-parts.ts";
import { MAX_LINE_DEPTH } from "./harness/jsonl.ts";
import { nestingExceeds } from "../src/shared/json-text.ts";
import { DeltaBuffer } from "./delta-buffer.ts";
import { foreign, redactValues, tenantMessage } from "./error-text.ts";
import type { SessionLink } from "./link.ts";
import type { Logger } from "./log.ts";
import { telemetry, type TurnSpan } from "./telemetry.ts";
import { TurnTools, type SessionTools, type ToolRoute } from "./turn-tools.ts";
import type { ToolEnv, ToolScope } from "./tools/types.ts";
import { errorResult } from "./tools/outcome.ts";
import { resultProblem } from "../src/shared/result-schema.ts";

/**
 * The abort reasons of a turn's signal, made once: `abort()` without a reason builds a new
 * `DOMException` (and its stack) every time, ~3% of the runner-host's CPU under load when every
 * turn's end did. Both are `AbortError`s, as a reasonless abort's would be.
 */
/** Deepest native record the runner-host keeps, levels: it must fit an `open` line's nesting bound. */
const MAX_RECORD_DEPTH = MAX_LINE_DEPTH - 3;
const TURN_ENDED = new DOMException("the turn ended", "AbortError");
const TURN_INTERRUPTED = new DOMException("the turn was interrupted", "AbortError");

/** Time a harness gets to end a turn after `interrupt`, ms: pi aborts at once; more means hung. */
export const INTERRUPT_GRACE_MS = 10_000;

export type TurnEnd = Pick<TurnEndEvent, "status" | "error">;

export type TurnOptions = {
  turn: string;
  /** Session id inside the harness. */
  key: string;
  link: SessionLink;
  route(name: string): ToolRoute;
  /** The session's runtime replies and credential overrides. */
  session: SessionTools;
  env: ToolEnv;
  scope: Omit<ToolScope, "call_id">;
  /** The runner secret: inspection tokens are signed with a key derived from it. */
  secret: string;
  traceparent?: string;
  /** When the object accepted the message (ms since epoch). */
  acceptedAt: number;
  log: Logger;
  /** Native records the harness appended, for the session's cache. */
  onNative(records: unknown[]): void;
  /** Exact secret values (provider keys) to remove from tenant-visible text. */
  secrets(): Iterable<string>;
};

/**
 * A harness's `turn.end` error in the service's words: the harness (and through it the provider)
 * contributes only a redacted, bounded detail.
 */
/** A harness's `turn.end` as the turn's end; `interrupted` without an error is still an interruption. */
function harnessEnd(e: TurnEndEvent): TurnEnd {
  // The status the session takes for this error (docs/api.md "Turns"), whatever the harness said,
  // so the runner-host's log tells what the session's events tell.
  if (e.error) return { status: e.error.code === "service_error" ? "failed" : "interrupted", error: harnessError(e.error) };
  if (e.status === "interrupted") return { status: e.status, error: { code: "conflict", message: "the turn was interrupted" } };
  return { status: e.status };
}

function harnessError(e: NonNullable<TurnEndEvent["error"]>): NonNullable<TurnEnd["error"]> {
  if (e.code === "conflict") return { code: e.code, message: "the turn was interrupted" };
  const own = e.code === "provider_error" ? "the model provider failed" : "the harness failed the turn";
  return { code: e.code, message: `${own}: ${foreign(e.message)}` };
}

export class Turn {
  readonly id: string;
  /** Resolves once `turn_end` was handed to the link, with its seq. */
  readonly done: Promise<number>;
  readonly #o: TurnOptions;
  readonly #abort = new AbortController();
  readonly #deltas: DeltaBuffer;
  #resolveDone!: (seq: number) => void;
  #slot: TurnSlot | undefined;
  #tools: TurnTools | undefined;
  #unsubscribe = () => {};
  #override: TurnEnd | undefined;
  #ending = false;
  #watchdog: NodeJS.Timeout | undefined;
  /** Wall-clock ms of the run's start and of its first output, for the timing log. */
  #startedAt: number | undefined;
  #firstOutputAt: number | undefined;
  /** `session.execute`, from `start` until `turn_end` was sent. */
  #span: TurnSpan | undefined;

  constructor(o: TurnOptions) {
    this.id = o.turn;
    this.#o = o;
    this.#deltas = new DeltaBuffer((text, lead) => {
      this.#noteOutput();
      o.link.sendLive({ t: "delta", turn: o.turn, text: redactValues(text, o.secrets()) }, lead);
    });
    this.done = new Promise((r) => (this.#resolveDone = r));
  }

  /** Aborted by an interrupt: cancels the wait for capacity, and host tool calls in flight. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** Runs the turn in the granted slot. Events of the turn arrive only after the `run` response. */
  async start(slot: TurnSlot, text: string): Promise<void> {
    if (this.#ending) return;
    this.#slot = slot;
    this.#startedAt = Date.now();
    this.#span = telemetry().startTurnSpan({ sessionId: this.#o.scope.session_id, harness: slot.harness, traceparent: this.#o.traceparent });
    telemetry().queueDelay(this.#startedAt - this.#o.acceptedAt);
    const { hp } = slot;
    const trace = this.#span.context;
    this.#tools = new TurnTools({ ...this.#o, hp, trace, signal: this.#abort.signal, beforeSend: () => this.#deltas.flush() });
    this.#unsubscribe = hp.onEvent(this.#o.key, (e) => this.#onEvent(e));
    // A `run` answered late may still start the turn in the harness, where nobody reads it (and it
    // spends provider tokens): the interrupt takes it back (harness-process.ts `undo`).
    const undo = { op: "interrupt", session: this.#o.key } as const;
    const res = await hp.request({ op: "run", session: this.#o.key, turn: this.id, text }, { undo }).catch((err: Error) => err);
    if (res instanceof Error) return this.end({ status: "failed", error: { code: "service_error", message: `the harness did not take the turn: ${foreign(res.message)}` } });
    if (!res.ok) {
      return this.end({ status: "failed", error: { code: "service_error", message: `the harness refused the turn: ${foreign(res.error.message)}` } });
    }
    // Interrupted while `run` was on its way. (`end` aborts too: a turn whose `turn.end` arrived in
    // the same read as the `run` response is over, not interrupted.)
    if (this.#abort.signal.aborted && !this.#ending) this.#interruptHarness();
  }

  /** Stops the turn: waiting → ends now; running → the harness is told and ends it. */
  interrupt(override?: TurnEnd): void {
    if (override) this.#override ??= override;
    if (this.#ending) return;
    this.#abort.abort(TURN_INTERRUPTED);
    if (this.#slot) this.#interruptHarness();
  }

  /** Ends the turn with this status (unless an override decided it): sends `turn_end` once. */
  end(end: TurnEnd): void {
    if (this.#ending) return;
    this.#ending = true;
    clearTimeout(this.#watchdog);
    this.#unsubscribe();
    this.#abort.abort(TURN_ENDED); // host calls still running have lost their turn
    void this.#finish(this.#override ?? end);
  }

  async #finish(end: TurnEnd): Promise<void> {
    await this.#tools?.settle();
    this.#deltas.flush();
    const error = end.error && { code: end.error.code, message: tenantMessage(end.error.message, this.#o.secrets()) };
    const seq = this.#o.link.send({ t: "turn_end", turn: this.id, status: end.status, ...(error ? { error } : {}) });
    this.#resolveDone(seq);
    // The same figures as svc.input.queue_delay and svc.assistant.first_output, for the log.
    const since = (t: number | undefined) => (t === undefined ? null : t - this.#o.acceptedAt);
    this.#span?.end(end.status, end.error?.code);
    this.#o.log("info", "turn ended", {
      session_id: this.#o.scope.session_id,
      turn: this.id,
      status: end.status,
      code: end.error?.code,
      queue_delay_ms: since(this.#startedAt),
      first_output_ms: since(this.#firstOutputAt),
      duration_ms: since(Date.now()),
    });
  }

  #noteOutput(): void {
    if (this.#firstOutputAt !== undefined) return;
    this.#firstOutputAt = Date.now();
    telemetry().firstOutput(this.#firstOutputAt - this.#o.acceptedAt);
  }

  #interruptHarness(): void {
    if (this.#ending) return;
    const { hp } = this.#slot!;
    hp.request({ op: "interrupt", session: this.#o.key }).catch(() => {}); // a process that cannot take it is ended by the watchdog below
    this.#watchdog ??= setTimeout(() => {
      this.#o.log("error", "harness did not end an interrupted turn; killing it", { pid: hp.pid });
      this.#override ??= { status: "interrupted", error: { code: "conflict", message: "the turn was interrupted" } };
      void hp.kill("killed", `did not end an interrupted turn within ${INTERRUPT_GRACE_MS} ms`);
    }, INTERRUPT_GRACE_MS);
  }

  #onEvent(e: SessionEvent): void {
    if (e.turn !== this.id || this.#ending) return;
    switch (e.type) {
      case "assistant.delta":
        if (this.#abort.signal.aborted) return;
        return this.#deltas.push(e.text);
      case "assistant.message": {
        // An interrupted turn records no reply, whoever stopped it (the client, a close, a
        // shutdown): what the harness reports after the stop is the reply it cut off, with usage
        // it could not know (docs/api.md "Turns").
        if (this.#abort.signal.aborted) return;
        this.#deltas.flush();
        const { usage, stop_reason, model } = e;
        // A harness's output never carries the key it was given, whatever it echoes
        // (docs/harness-protocol.md "Events").
        const text = redactValues(e.text, this.#o.secrets());
        this.#noteOutput();
        this.#o.link.send({ t: "assistant", turn: this.id, text, usage, stop_reason });
        const want = this.#slot!.model;
        if (model.provider !== want.provider || model.id !== want.id) {
          // A fallback to another model fails the turn (docs/configuration.md "Providers").
          const message = `the harness answered with model ${model.provider}/${model.id} instead of ${want.provider}/${want.id}`;
          this.interrupt({ status: "failed", error: { code: "service_error", message } });
        }
        return;
      }
      case "state.append": {
        this.#deltas.flush();
        // A provider's error the harness keeps in its history may quote the key (never at rest).
        const records = redactValues(e.records, this.#o.secrets());
        // A record the harness could not be sent back in one line would leave a session that can
        // never be opened again: refused here, it fails this turn only (a resume goes back to
        // the last checkpoint, without it).
        const texts = records.map((r) => JSON.stringify(r));
        // Inside an `open` a record sits at level 4 of the line (`{state:{records:[…]}}`).
        if (texts.some((t) => nestingExceeds(t, MAX_RECORD_DEPTH))) {
          const message = `the harness wrote a native state record nesting deeper than ${MAX_RECORD_DEPTH} levels, which no line can send back (${MAX_LINE_DEPTH} levels)`;
          return this.interrupt({ status: "failed", error: { code: "service_error", message } });
        }
        const sizes = texts.map((t) => Buffer.byteLength(t));
        const max = this.#slot!.hp.maxLineBytes;
        const over = sizes.map((n) => recordLineBytes(this.#o.key, n)).find((n) => n > max);
        if (over !== undefined) {
          const message = `the harness wrote a native state record that needs a ${over}-byte line to be sent back, over its line limit (${max} bytes)`;
          return this.interrupt({ status: "failed", error: { code: "service_error", message } });
        }
        this.#o.link.send({ t: "native", records });
        // The records as one JSON array: their own bytes, the commas between them and the brackets.
        telemetry().nativeAppended(sizes.reduce((a, b) => a + b, 0) + Math.max(sizes.length - 1, 0) + 2);
        return this.#o.onNative(records);
      }
      case "tool.call":
        this.#deltas.flush();
        return this.#tools!.onCall(redactValues(e.call, this.#o.secrets()), e.answered === true);
      case "tool.result": {
        // Held to what any result must hold (the OpenAPI document's Result): a harness's own answer
        // that does not is recorded as an error result saying why.
        const result = redactValues(e.result, this.#o.secrets());
        const problem = resultProblem(result);
        return this.#tools!.onLocalResult(e.call_id, problem ? errorResult(`the harness answered the call with an invalid result: ${problem}`, false) : result);
      }
      case "turn.end":
        return this.end(harnessEnd(e));
    }
  }
}
