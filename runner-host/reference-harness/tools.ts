/**
 * Tools are delegated: the harness never runs or validates one (docs/harness-protocol.md
 * "The reference harness").
 * - Each AgentTool has an accept-all `parameters: {}`, so pi neither rejects nor coerces
 *   arguments; the service is the only validator (docs/api.md "Tools": schema failures are its
 *   `tool.result is_error`).
 * - `withRealSchemas` puts the real JSON Schemas back into the provider request.
 * - `execute` parks the call until the service answers with `tool_result`, or the turn's abort
 *   signal fires (interrupt).
 */
import type { AgentTool, AgentToolResult } from "@mariozechner/pi-agent-core";
import type { Context, ImageContent, TextContent, TSchema } from "@mariozechner/pi-ai";
import type { ToolResult, ToolSpec } from "../harness/protocol.ts";

/** Error text pi records in the toolResult message of a call cut off by an interrupt. */
export const INTERRUPTED_TOOL_TEXT = "Tool call interrupted";

export interface ToolDetails {
  is_error: boolean;
  unknown_outcome?: boolean;
}

export interface ToolWaits {
  /** Called once per dispatched call, before the harness waits for its result. */
  dispatch(callId: string, name: string, args: Record<string, unknown>): void;
  /** Why this call must not run (its arguments were not what the model meant to send), if so. */
  refusal?(callId: string): string | undefined;
}

interface Waiter {
  resolve(result: AgentToolResult<ToolDetails>): void;
  reject(error: Error): void;
}

/** Pending delegated calls of one session, keyed by provider call id. */
export class PendingCalls {
  #waiters = new Map<string, Waiter>();

  get size(): number {
    return this.#waiters.size;
  }

  wait(callId: string, signal: AbortSignal | undefined): Promise<AgentToolResult<ToolDetails>> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(new Error(INTERRUPTED_TOOL_TEXT));
      this.#waiters.set(callId, { resolve, reject });
      signal?.addEventListener(
        "abort",
        () => {
          if (this.#waiters.delete(callId)) reject(new Error(INTERRUPTED_TOOL_TEXT));
        },
        { once: true },
      );
    });
  }

  /** Delivers a service result; false when no call with that id is waiting (stale or duplicate). */
  settle(callId: string, result: ToolResult): boolean {
    const waiter = this.#waiters.get(callId);
    if (!waiter) return false;
    this.#waiters.delete(callId);
    waiter.resolve(toAgentResult(result));
    return true;
  }
}

export function makeAgentTools(specs: ToolSpec[], calls: PendingCalls, waits: ToolWaits): AgentTool[] {
  return specs.map((spec) => ({
    name: spec.name,
    label: spec.name,
    description: spec.description,
    parameters: {} as TSchema,
    execute: (callId: string, args: unknown, signal?: AbortSignal) => {
      // Refused here, never dispatched: pi records the error as the call's result.
      const refused = waits.refusal?.(callId);
      if (refused !== undefined) return Promise.reject(new Error(refused));
      const waiting = calls.wait(callId, signal);
      if (!signal?.aborted) waits.dispatch(callId, spec.name, (args ?? {}) as Record<string, unknown>);
      return waiting;
    },
  }));
}

/** The provider sees each tool's real JSON Schema, not the accept-all one pi validates with. */
export function withRealSchemas(context: Context, schemas: Map<string, Record<string, unknown>>): Context {
  if (!context.tools) return context;
  return {
    ...context,
    tools: context.tools.map((t) => ({ ...t, parameters: (schemas.get(t.name) ?? t.parameters) as TSchema })),
  };
}

/** Service result → pi tool result. `structured_content` becomes JSON text when `content` is empty. */
export function toAgentResult(result: ToolResult): AgentToolResult<ToolDetails> {
  const content: (TextContent | ImageContent)[] = result.content.map((c) =>
    c.type === "text" ? { type: "text", text: c.text } : { type: "image", data: c.data, mimeType: c.mime_type },
  );
  if (content.length === 0 && result.structured_content !== undefined) {
    content.push({ type: "text", text: JSON.stringify(result.structured_content) });
  }
  const details: ToolDetails = { is_error: result.is_error === true };
  if (result.unknown_outcome) details.unknown_outcome = true;
  return { content, details };
}

/** pi tool result content → service content (for the synthetic results the harness produces). */
export function toServiceContent(content: unknown): ToolResult["content"] {
  if (!Array.isArray(content)) return [];
  const out: ToolResult["content"] = [];
  for (const c of content as (TextContent | ImageContent)[]) {
    if (c.type === "text") out.push({ type: "text", text: c.text });
    else if (c.type === "image") out.push({ type: "image", data: c.data, mime_type: c.mimeType });
  }
  return out;
}
