/**
 * The tool calls of one turn (docs/api.md "Events", "Tools").
 *
 * Each harness `tool.call` gets a service call id (32 hex, the `tool.call` event id) mapped to the
 * harness's own id. A host tool enabled for the session is validated, announced (`tool_call`,
 * dispatched), executed with progress relayed live, and its result sent to the object and handed
 * back to the harness. A name the session enables but no host tool serves is refused with an error
 * result to both, and so is a name the session does not know, unless the harness marked the call
 * `answered` (it answers it itself, and its `tool.result` is forwarded).
 * Invariant: every `tool_call` sent gets exactly one `tool_result`, also when the turn is
 * interrupted or its harness dies (`settle` writes what is missing). Every call, refused ones
 * included, has a `tool.call` span and counts in `svc.tool.calls` / `svc.tool.duration`, from the
 * harness's request to its result.
 */
import { HarnessError, type HarnessProcess } from "./harness/harness-process.ts";
import { LINK_GIVE_UP_MS } from "./link.ts";
import type { TurnOptions } from "./turn.ts";
import type { ToolResult } from "./harness/protocol.ts";
import { telemetry, traceparentOf, type TraceContext, type ToolSpan } from "./telemetry.ts";
import { executeHostTool } from "./tools/dispatch.ts";
import { validateInput } from "../src/shared/json-schema.ts";
import { MAX_JSON_DEPTH } from "../src/shared/json-text.ts";
import { nestsDeeper } from "../src/shared/json-values.ts";
import { headerSecrets } from "../src/shared/credential-headers.ts";
import { errorResult } from "./tools/outcome.ts";
import { redactValues } from "./error-text.ts";
import type { HostTool } from "../src/shared/config-schema.ts";
import type { ToolCallContext, ToolScope } from "./tools/types.ts";
import { awaitRuntimeResult, type RuntimeDescriptor, type RuntimeReplies } from "./tools/runtime-tool.ts";
import type { CredentialValue } from "../src/shared/runner-protocol.ts";
import { newId } from "../src/shared/ids.ts";
import { mintInspectionToken } from "../src/shared/inspection-token.ts";

/**
 * How long a host call waits for the object to acknowledge its `tool_call` before giving up, ms:
 * the link's own give-up bound, since the ack arrives as soon as a dropped link is back.
 */
const RECORD_WAIT_MS = LINK_GIVE_UP_MS;

/**
 * How a tool name resolves for a session. A host tool of a binding carries the binding's
 * `parameters` and whether the session has a credential override for it; a runtime tool is
 * served by an executor through the object.
 */
export type ToolRoute =
  | { kind: "host"; tool: HostTool; parameters?: Record<string, unknown>; credential?: boolean }
  | { kind: "runtime"; descriptor: RuntimeDescriptor }
  | { kind: "refused"; message: string }
  | { kind: "harness" };

/** What a turn's tool calls need from their session beyond the turn. */
export type SessionTools = {
  /** Runtime calls waiting for the object's `tool_reply`. */
  replies: RuntimeReplies;
  /** The session's credential override for a host tool call, asked of the object now. */
  credential(callId: string, signal: AbortSignal): Promise<CredentialValue | { error: string }>;
};

/** What a turn knows (see TurnOptions in turn.ts), plus the harness and the turn's span and signal. */
export type TurnToolsOptions = Pick<TurnOptions, "turn" | "key" | "link" | "route" | "env" | "scope" | "secret" | "log" | "session"> & {
  hp: HarnessProcess;
  /** The turn's span: each call gets a `tool.call` span under it, whose `traceparent` a host tool receives. */
  trace: TraceContext;
  /** Aborted on interrupt or when the turn ends: stops host calls in flight. */
  signal: AbortSignal;
  /** Flushes pending deltas: called before each numbered message, so order holds. */
  beforeSend(): void;
};

/** `metric`: the call's `tool` label in svc.tool.* (metricLabel). */
type Call = { id: string; harnessId: string; name: string; metric: string; answered: boolean; started: number; span: ToolSpan };

/**
 * The `tool` label of a call's metrics. Only a host tool's name, from the host configuration, is
 * a label value: a runtime tool's name is its tenant's, and a name the model made up (a tool the
 * session does not have, or one the harness answers itself) is anything at all, of any length. As
 * labels they would carry a tenant's words into metrics and grow the series without bound, so
 * they count as `runtime`, `harness` and `unknown`. The call's span keeps the real name.
 */
function metricLabel(route: ToolRoute, answeredByHarness: boolean): string {
  if (answeredByHarness) return "harness";
  if (route.kind === "host") return route.tool.name;
  return route.kind === "runtime" ? "runtime" : "unknown";
}

export class TurnTools {
  readonly #o: TurnToolsOptions;
  #inFlight = new Set<Promise<void>>();
  /** Calls the harness answers itself, by harness call id, until its `tool.result` arrives. */
  #local = new Map<string, Call>();

  constructor(o: TurnToolsOptions) {
    this.#o = o;
  }

  /** `answeredByHarness`: the harness answers it itself (its `tool.result` follows); never run here. */
  onCall(call: { id: string; name: string; arguments: Record<string, unknown> }, answeredByHarness = false): void {
    const span = telemetry().startToolSpan(this.#o.trace, call.name);
    const route = this.#o.route(call.name);
    const c: Call = { id: newId(), harnessId: call.id, name: call.name, metric: metricLabel(route, answeredByHarness), answered: false, started: performance.now(), span };
    if (answeredByHarness) {
      this.#announce(c, call.arguments, false);
      this.#local.set(call.id, c);
      return;
    }
    if (route.kind === "harness") {
      // Not marked answered: the harness waits for a result, as for any call it hands over.
      this.#announce(c, call.arguments, false);
      return this.#answer(c, errorResult(`the session has no tool "${call.name}"`, false), true);
    }
    if (route.kind === "refused") {
      this.#announce(c, call.arguments, false);
      return this.#answer(c, errorResult(route.message, false), true);
    }
    // A binding's parameters join the model's arguments; the tool validates the whole.
    const args = route.kind === "host" && route.parameters ? { ...call.arguments, ...route.parameters } : call.arguments;
    const schema = route.kind === "host" ? route.tool.input_schema : route.descriptor.input_schema;
    // The bound a request body and a tool's answer have: what a tool or executor gets never nests deeper.
    const problem = nestsDeeper(args, MAX_JSON_DEPTH) ? `the arguments nest deeper than ${MAX_JSON_DEPTH} levels` : validateInput(schema, args);
    if (problem !== null) {
      this.#announce(c, call.arguments, false);
      return this.#answer(c, errorResult(`invalid arguments for tool "${call.name}": ${problem}`, false), true);
    }
    const seq = this.#announce(c, call.arguments, true);
    const run = route.kind === "runtime" ? this.#executeRuntime(c, route.descriptor) : this.#execute(c, args, route.tool, route.credential === true, seq);
    this.#inFlight.add(run);
    void run.finally(() => this.#inFlight.delete(run));
  }

  /** A `tool.result` the harness produced itself (a tool name the session does not have, a call it refused). */
  onLocalResult(harnessId: string, result: ToolResult): void {
    const c = this.#local.get(harnessId);
    if (!c) return this.#o.log("warn", "harness tool.result for no known call", { turn: this.#o.turn });
    this.#local.delete(harnessId);
    this.#answer(c, result, false);
  }

  /** Waits for host calls in flight (the turn's abort stops them), then answers what is left. */
  async settle(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.all(this.#inFlight);
    for (const c of this.#local.values()) this.#answer(c, errorResult(`tool "${c.name}" got no result before the turn ended`, false), false);
    this.#local.clear();
  }

  /**
   * A runtime call: the object sends it to the executor once the announced `tool_call` is
   * recorded; the answer comes back as `tool_reply`. Never throws.
   */
  async #executeRuntime(c: Call, descriptor: RuntimeDescriptor): Promise<void> {
    this.#answer(c, await awaitRuntimeResult(descriptor, c.id, this.#o.session.replies, this.#o.signal), true);
  }

  /**
   * Runs a host call to its result and answers it; never throws. The call is dispatched only once
   * the object has acknowledged its `tool_call` (seq `announced`): the `tool.call` event is
   * recorded before dispatch, so anything the tool reads back (an inspected session) has it.
   */
  async #execute(c: Call, args: Record<string, unknown>, tool: HostTool, withCredential: boolean, announced: number): Promise<void> {
    if (!(await this.#recorded(announced))) {
      const why = this.#o.signal.aborted ? "the turn ended first" : "the session did not record the call in time";
      return this.#answer(c, errorResult(`tool "${c.name}" was not called: ${why}`, false), true);
    }
    let result: ToolResult;
    // What the call authenticates with: a tool that echoes it back (a debug endpoint, an error
    // quoting the request) must not put it in an event, the harness's context or the stored log.
    const secrets = tool.token_env && this.#o.env[tool.token_env] ? [this.#o.env[tool.token_env]!] : [];
    try {
      const scope = await this.#scope(tool, c.id);
      const ctx: ToolCallContext = {
        traceparent: traceparentOf(c.span.context),
        signal: this.#o.signal,
        onProgress: (data) => void this.#o.link.sendLive({ t: "progress", turn: this.#o.turn, call_id: c.id, data: redactValues(data, secrets) }),
      };
      // The session's override replaces the tool's token_env credential for this call only; it is
      // fetched now and dropped with the call.
      const credential = withCredential ? await this.#o.session.credential(c.id, this.#o.signal) : undefined;
      if (credential !== undefined && typeof credential === "object" && "error" in credential) {
        result = errorResult(`tool "${c.name}" could not use its credential override: ${credential.error}`, false);
      } else {
        if (typeof credential === "string") {
          ctx.bearer = credential;
          secrets.push(credential);
        } else if (credential !== undefined) {
          ctx.headers = credential.headers;
          secrets.push(...headerSecrets(credential.headers));
        }
        result = await executeHostTool(tool, { call_id: c.id, tool: c.name, arguments: args, scope }, ctx, this.#o.env, secrets);
      }
    } catch (err) {
      this.#o.log("error", "host tool call failed unexpectedly", { tool: c.name, error: (err as Error).message });
      result = errorResult(`tool "${c.name}" failed unexpectedly`, true);
    }
    this.#answer(c, result, true);
  }

  /**
   * The call's scope. A tool with `inspect_session` also gets a read-only token for this session,
   * valid for the call's timeout plus a grace period (docs/api.md "Tools"); the
   * service stops honouring it once the call's result is recorded.
   */
  async #scope(tool: HostTool, callId: string): Promise<ToolScope> {
    const scope: ToolScope = { ...this.#o.scope, call_id: callId };
    if (!tool.inspect_session) return scope;
    const token = { tenant: scope.tenant_id, session: scope.session_id, call: callId };
    scope.inspection_token = await mintInspectionToken(this.#o.secret, token, tool.timeout_seconds);
    return scope;
  }

  /** True once the object acknowledged up to `seq`; false if the turn ends or the link stays away first. */
  async #recorded(seq: number): Promise<boolean> {
    const signal = this.#o.signal;
    if (signal.aborted) return false;
    let onAbort = () => {};
    const aborted = new Promise<false>((resolve) => signal.addEventListener("abort", (onAbort = () => resolve(false)), { once: true }));
    try {
      return await Promise.race([this.#o.link.waitAcked(RECORD_WAIT_MS, seq), aborted]);
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** Sends the `tool_call`; returns its link seq. */
  #announce(c: Call, args: Record<string, unknown>, dispatched: boolean): number {
    this.#o.beforeSend();
    return this.#o.link.send({ t: "tool_call", turn: this.#o.turn, call: { id: c.id, name: c.name, arguments: args }, dispatched });
  }

  #answer(c: Call, result: ToolResult, toHarness: boolean): void {
    if (c.answered) return;
    c.answered = true;
    const outcome = result.is_error ? "tool_error" : "success";
    const ms = performance.now() - c.started;
    c.span.end(outcome);
    telemetry().toolCall(c.metric, outcome, ms);
    this.#o.log("debug", "tool call finished", { tool: c.name, outcome, duration_ms: Math.round(ms) });
    this.#o.beforeSend();
    this.#o.link.send({ t: "tool_result", turn: this.#o.turn, call_id: c.id, result });
    if (!toHarness || this.#o.signal.aborted) return; // an interrupted harness no longer waits for it
    this.#deliver(c, result, true);
  }

  /** Hands a result to the harness. One too long for its line limit becomes an error result it can take. */
  #deliver(c: Call, result: ToolResult, retryTooLarge: boolean): void {
    const { hp, key } = this.#o;
    hp.request({ op: "tool_result", session: key, call_id: c.harnessId, result }).then(
      (res) => !res.ok && this.#o.log("debug", "harness declined a tool result", { code: res.error.code }),
      (err: Error) => {
        if (!(err instanceof HarnessError && err.code === "too_large") || !retryTooLarge) return; // else the process is gone; its exit ends the turn
        this.#deliver(c, errorResult(`tool "${c.name}" returned more than the harness can receive in one message`, true), false);
      },
    );
  }
}
