/**
 * The runner-host's half of a runtime (executor-served) tool call. The call itself travels through
 * the session object to the executor; here the turn waits for the object's `tool_reply` within the
 * call's budget, then applies the checks the object applied as it took the reply (output schema,
 * output cap: src/shared/runtime-result.ts), so what the harness sees never depends on the object.
 *
 * Runtime tools have no host configuration entry, so they take the host tools' defaults:
 * `timeout_seconds` 300 and `max_output_bytes` 1 MiB (counted on the Result's JSON).
 */
import { TOOL_MAX_OUTPUT_BYTES, TOOL_TIMEOUT_SECONDS } from "../../src/shared/config-tools.ts";
import { checkRuntimeResult } from "../../src/shared/runtime-result.ts";
import { CallBudget, stoppedResult } from "./outcome.ts";
import type { HostTool } from "../../src/shared/config-schema.ts";
import type { ToolResult } from "../../src/shared/result-schema.ts";

/** Resolvers of the runtime calls a session is waiting on, by call id. */
export class RuntimeReplies {
  #waiting = new Map<string, (r: ToolResult) => void>();

  wait(callId: string): Promise<ToolResult> {
    return new Promise((resolve) => this.#waiting.set(callId, resolve));
  }

  /** A `tool_reply` arrived; one for a call no longer waited on (ended by timeout) is dropped. */
  deliver(callId: string, result: ToolResult): void {
    const resolve = this.#waiting.get(callId);
    this.#waiting.delete(callId);
    resolve?.(result);
  }

  forget(callId: string): void {
    this.#waiting.delete(callId);
  }
}

/** The host-tool shape the shared checks take, for a runtime descriptor. */
export function runtimeAsTool(d: { name: string; output_schema?: Record<string, unknown> | null }): HostTool {
  return {
    name: d.name,
    description: "",
    input_schema: { type: "object" },
    output_schema: d.output_schema ?? null,
    url: "",
    tenants: [],
    token_env: "",
    transport: "http",
    mcp_tool: "",
    timeout_seconds: TOOL_TIMEOUT_SECONDS.default,
    max_output_bytes: TOOL_MAX_OUTPUT_BYTES.default,
    inspect_session: false,
  };
}

/** Waits for the executor's answer to a dispatched call, bounded by the timeout and the turn. */
export type RuntimeDescriptor = { name: string; input_schema: Record<string, unknown>; output_schema?: Record<string, unknown> };

export async function awaitRuntimeResult(descriptor: RuntimeDescriptor, callId: string, replies: RuntimeReplies, turn: AbortSignal): Promise<ToolResult> {
  const tool = runtimeAsTool(descriptor);
  const budget = new CallBudget(tool.timeout_seconds, turn);
  try {
    const stopped = new Promise<null>((resolve) => budget.signal.addEventListener("abort", () => resolve(null), { once: true }));
    const result = await Promise.race([replies.wait(callId), stopped]);
    if (result === null) return stoppedResult(tool, budget.stopped ?? "interrupted");
    return checkRuntimeResult(descriptor, result);
  } finally {
    replies.forget(callId);
    budget.dispose();
  }
}
