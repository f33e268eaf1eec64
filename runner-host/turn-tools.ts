/**
 * The tool calls of one turn (docs/api.md "Events", "Tools").
 *
 * Each harness `tool.call` gets a service call id (32 hex, the `tool.call` event id) mapped to the
 * harness's own id. A host tool enabled for the session is validated, announced (`tool_call`,
 * dispatched), executed with progress relayed live, and its result sent to the object and handed
 * back to the harness. A name the session enables but no host tool serves is refused with an error
 * result to both; a name the session does not know is answered by the harness itself, whose
 * `tool.result` is forwarded.
 * Invariant: every `tool_call` sent gets exactly one `tool_result`, also when the turn is
 * interrupted or its harness dies (`settle` writes what is missing).
 */
import type { HarnessProcess } from "./harness/harness-process.ts";
import type { TurnOptions } from "./turn.ts";
import type { ToolResult } from "./harness/protocol.ts";
import { telemetry, traceparentOf, type TraceContext } from "./telemetry.ts";
import { executeHostTool } from "./tools/dispatch.ts";
import { validateInput } from "./tools/json-schema.ts";
import { errorResult } from "./tools/outcome.ts";
import type { HostTool } from "../src/shared/config-schema.ts";
import type { ToolScope } from "./tools/types.ts";
import { newId } from "../src/shared/ids.ts";
import { INSPECTION_GRACE_MS, mintInspectionToken } from "../src/shared/inspection-token.ts";

/** How a tool name resolves for a session. */
export type ToolRoute = { kind: "host"; tool: HostTool } | { kind: "refused"; message: string } | { kind: "harness" };

/** What a turn knows (see TurnOptions in turn.ts), plus the harness and the turn's span and signal. */
export type TurnToolsOptions = Pick<TurnOptions, "turn" | "key" | "link" | "route" | "env" | "scope" | "secret" | "log"> & {
  hp: HarnessProcess;
  /** The turn's span: each host call gets a `tool.call` span under it, whose `traceparent` the tool receives. */
  trace: TraceContext;
  /** Aborted on interrupt or when the turn ends: stops host calls in flight. */
  signal: AbortSignal;
  /** Flushes pending deltas: called before each numbered message, so order holds. */
  beforeSend(): void;
};

type Call = { id: string; harnessId: string; name: string; answered: boolean };

export class TurnTools {
  readonly #o: TurnToolsOptions;
  #inFlight = new Set<Promise<void>>();
  /** Calls the harness answers itself, by harness call id, until its `tool.result` arrives. */
  #local = new Map<string, Call>();

  constructor(o: TurnToolsOptions) {
    this.#o = o;
  }

  onCall(call: { id: string; name: string; arguments: Record<string, unknown> }): void {
    const c: Call = { id: newId(), harnessId: call.id, name: call.name, answered: false };
    const route = this.#o.route(call.name);
    if (route.kind === "harness") {
      this.#announce(c, call.arguments, false);
      this.#local.set(call.id, c);
      return;
    }
    if (route.kind === "refused") {
      this.#announce(c, call.arguments, false);
      return this.#answer(c, errorResult(route.message, false), true);
    }
    const problem = validateInput(route.tool.input_schema, call.arguments);
    if (problem !== null) {
      this.#announce(c, call.arguments, false);
      return this.#answer(c, errorResult(`invalid arguments for tool "${call.name}": ${problem}`, false), true);
    }
    this.#announce(c, call.arguments, true);
    const run = this.#execute(c, call.arguments, route.tool);
    this.#inFlight.add(run);
    void run.finally(() => this.#inFlight.delete(run));
  }

  /** A `tool.result` the harness produced itself (a tool name the session does not have). */
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

  /** Runs a host call to its result and answers it; never throws. */
  async #execute(c: Call, args: Record<string, unknown>, tool: HostTool): Promise<void> {
    const started = performance.now();
    const span = telemetry().startToolSpan(this.#o.trace, c.name);
    let result: ToolResult;
    try {
      const scope = await this.#scope(tool, c.id);
      result = await executeHostTool(
        tool,
        { call_id: c.id, tool: c.name, arguments: args, scope },
        {
          traceparent: traceparentOf(span.context),
          signal: this.#o.signal,
          onProgress: (data) => void this.#o.link.sendLive({ t: "progress", turn: this.#o.turn, call_id: c.id, data }),
        },
        this.#o.env,
      );
    } catch (err) {
      this.#o.log("error", "host tool call failed unexpectedly", { tool: c.name, error: (err as Error).message });
      result = errorResult(`tool "${c.name}" failed unexpectedly`, true);
    }
    const outcome = result.is_error ? "tool_error" : "success";
    const ms = performance.now() - started;
    span.end(outcome);
    telemetry().toolCall(c.name, outcome, ms);
    this.#o.log("debug", "tool call finished", { tool: c.name, outcome, duration_ms: Math.round(ms) });
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
    const e = Date.now() + tool.timeout_seconds * 1000 + INSPECTION_GRACE_MS;
    scope.inspection_token = await mintInspectionToken(this.#o.secret, { t: scope.tenant_id, s: scope.session_id, c: callId, e });
    return scope;
  }

  #announce(c: Call, args: Record<string, unknown>, dispatched: boolean): void {
    this.#o.beforeSend();
    this.#o.link.send({ t: "tool_call", turn: this.#o.turn, call: { id: c.id, name: c.name, arguments: args }, dispatched });
  }

  #answer(c: Call, result: ToolResult, toHarness: boolean): void {
    if (c.answered) return;
    c.answered = true;
    this.#o.beforeSend();
    this.#o.link.send({ t: "tool_result", turn: this.#o.turn, call_id: c.id, result });
    if (!toHarness || this.#o.signal.aborted) return; // an interrupted harness no longer waits for it
    const { hp, key } = this.#o;
    hp.request({ op: "tool_result", session: key, call_id: c.harnessId, result }).then(
      (res) => !res.ok && this.#o.log("debug", "harness declined a tool result", { code: res.error.code }),
      () => {}, // the process is gone; its exit ends the turn
    );
  }
}
