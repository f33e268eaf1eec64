/**
 * What both transports share about outcomes: the error results the runner-host writes itself, the
 * check of a Result a tool sent, the per-call budget (timeout, interrupt, output cap), and which
 * network failures prove the request never left (docs/api.md "Tools", with the unknown_outcome
 * table).
 */
import { byteLength } from "../../src/shared/ids.ts";
import { outputProblem } from "../../src/shared/runtime-result.ts";
import type { HostTool } from "../../src/shared/config-schema.ts";
import { resultProblem, ToolResultSchema, type ToolResult } from "../../src/shared/result-schema.ts";
import { issueSummary } from "../../src/shared/zod-issues.ts";

/** Results written here rather than by a tool: the output cap does not apply to them. */
const ours = new WeakSet<ToolResult>();

/**
 * An error result with a short human message. `unknownOutcome` is true when the request may have
 * reached the tool; otherwise the field is left out (absent means the tool did not act).
 */
export function errorResult(message: string, unknownOutcome: boolean): ToolResult {
  const result: ToolResult = { content: [{ type: "text", text: message }], is_error: true };
  if (unknownOutcome) result.unknown_outcome = true;
  ours.add(result);
  return result;
}

/**
 * `result` unless, written as JSON (the form it is recorded in), it is over `limit` bytes: then an
 * error with an unknown outcome (the tool ran), worded by `say`. Our own messages are never capped.
 */
export function capJson(result: ToolResult, limit: number, say: (bytes: number) => string): ToolResult {
  if (isOwnResult(result)) return result;
  const bytes = byteLength(JSON.stringify(result));
  return bytes <= limit ? result : errorResult(say(bytes), true);
}

export function isOwnResult(result: ToolResult): boolean {
  return ours.has(result);
}

export function label(tool: HostTool): string {
  return `tool "${tool.name}"`;
}

/**
 * Checks a tool's answer against the Result schema (objects allow no additional properties) and returns
 * a fresh object, so nothing the tool sent beyond the Result fields is carried along.
 */
export function parseResult(value: unknown): { result: ToolResult } | { problem: string } {
  const r = ToolResultSchema.safeParse(value);
  if (!r.success) return { problem: issueSummary(r.error.issues, 1) };
  // As for an executor's reply: a success that claims an unknown outcome says two things at once.
  const problem = resultProblem(r.data);
  return problem ? { problem } : { result: r.data };
}

/**
 * Applies the tool's `output_schema` to a successful result's `structured_content` only; error
 * results bypass it (docs/configuration.md "Tools"). A success without `structured_content`
 * fails too, as MCP requires of tools that declare an output schema. The tool did run, so a
 * failure here has an unknown outcome.
 */
export function checkOutput(tool: HostTool, result: ToolResult): ToolResult {
  const problem = outputProblem(tool.name, tool.output_schema, result);
  return problem ? errorResult(problem, true) : result;
}

/** Why a call stopped early; the AbortSignal reason, so a rejected read can be told apart. */
/** `invalid`: an MCP server's answer broke the rules every tool answer follows (mcp-fetch.ts). */
export type StopReason = "timeout" | "interrupted" | "oversize" | "dropped" | "no_result" | "invalid";

/**
 * One call's budget: `timeout_seconds` over the whole call (connect, request and the full
 * response stream) and the turn's interrupt, folded into one signal. Every exit must `dispose()`
 * so no listener stays on the turn's signal and no timer keeps the process alive.
 */
export class CallBudget {
  readonly signal: AbortSignal;
  #controller = new AbortController();
  #stopped: StopReason | null = null;
  #disposed = false;
  #timer: ReturnType<typeof setTimeout>;
  #turn: AbortSignal;
  #onTurnAbort = () => this.stop("interrupted");

  constructor(timeoutSeconds: number, turn: AbortSignal) {
    this.signal = this.#controller.signal;
    this.#turn = turn;
    this.#timer = setTimeout(() => this.stop("timeout"), timeoutSeconds * 1000);
    turn.addEventListener("abort", this.#onTurnAbort, { once: true });
    if (turn.aborted) this.stop("interrupted");
  }

  /**
   * The first reason wins; later ones would misreport what happened. After `dispose()` nothing
   * aborts any more: a finished call must not be cancelled by a late event.
   */
  stop(reason: StopReason): void {
    if (this.#stopped || this.#disposed) return;
    this.#stopped = reason;
    this.#controller.abort(reason);
  }

  get stopped(): StopReason | null {
    return this.#stopped;
  }

  dispose(): void {
    this.#disposed = true;
    clearTimeout(this.#timer);
    this.#turn.removeEventListener("abort", this.#onTurnAbort);
  }
}

/** The result for a call stopped by its budget after the request may have reached the tool. */
export function stoppedResult(tool: HostTool, reason: StopReason): ToolResult {
  if (reason === "timeout") return errorResult(`${label(tool)} timed out after ${tool.timeout_seconds} s`, true);
  if (reason === "oversize") return errorResult(`${label(tool)} output exceeded max_output_bytes (${tool.max_output_bytes})`, true);
  if (reason === "dropped") return errorResult(`${label(tool)} connection dropped before the result arrived`, true);
  if (reason === "no_result") return errorResult(`${label(tool)} response ended without its result`, true);
  return errorResult(`${label(tool)} call was interrupted; its outcome is unknown`, true);
}

/**
 * Socket error codes that mean no connection was made, so no byte of the request left: refused,
 * name resolution failed, no route, or the connect itself timed out.
 */
const NOT_CONNECTED = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_FAIL",
  "EAI_NONAME",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/**
 * True when a fetch failure proves the request was never sent. Walks `cause` chains and
 * AggregateError members (happy-eyeballs connects report one error per address); `bad port` is
 * fetch refusing a blocked port before connecting. Anything else counts as possibly sent.
 */
export function neverSent(err: unknown): boolean {
  return someCause(err, (code, message) => (typeof code === "string" && NOT_CONNECTED.has(code)) || message === "bad port");
}

/**
 * The answer's body failed to decode (a `Content-Encoding` it does not hold): the codes of Node's
 * decoders — zlib's `Z_…` (gzip, deflate), brotli's `ERR__ERROR_…`, zstd's `ZSTD_error_…`.
 */
export function undecodable(err: unknown): boolean {
  return someCause(err, (code) => typeof code === "string" && /^(Z_|ERR__ERROR_|ZSTD_error_)/.test(code));
}

/** Whether `err`, or any error among its causes (and an AggregateError's errors), matches. */
function someCause(err: unknown, match: (code: unknown, message: unknown) => boolean): boolean {
  const seen = new Set<unknown>();
  const stack = [err];
  while (stack.length > 0) {
    const e = stack.pop();
    if (typeof e !== "object" || e === null || seen.has(e)) continue;
    seen.add(e);
    const { code, message, cause, errors } = e as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
    if (match(code, message)) return true;
    stack.push(cause);
    if (Array.isArray(errors)) stack.push(...errors);
  }
  return false;
}
