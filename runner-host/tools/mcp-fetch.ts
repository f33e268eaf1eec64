/**
 * The fetch one MCP call's client goes through (mcp-tool.ts): what the MCP SDK would otherwise do
 * on its own, held to the rules every host tool answer follows (docs/api.md "Tools").
 *
 * - Redirects are not followed. The transport asks for `manual`, but its GET streams follow a
 *   same-origin redirect themselves (with the call's headers); a 3xx reaches the SDK without its
 *   `Location`, so it cannot.
 * - Bytes: every byte of every response body but the initialize answer counts against
 *   `max_output_bytes` (progress notifications included, on the `tools/call` stream or the
 *   standalone GET stream, as on the HTTP wire); the initialize answer has a bound of its own.
 * - Strict JSON, as for an HTTP tool's answer: a body that is not UTF-8, or a JSON message nested
 *   deeper than MAX_JSON_DEPTH, repeating a member name (JSON.parse keeps the last silently) or
 *   holding a lone surrogate, stops the call before the SDK reads it (`invalid`).
 * - Ends: the `tools/call` body failing mid-read stops the call as dropped, and ending without the
 *   result stops it as such — unless it was an event stream whose events carried ids: MCP lets a
 *   server end such a stream and the client resume it (GET with `Last-Event-ID`), which the SDK
 *   does within the call's timeout. A resume the server refuses (any status but 2xx) stops the
 *   call at once: the SDK would only report it to its error hook and wait for the timeout.
 */
import { createParser } from "eventsource-parser";
import { MAX_JSON_DEPTH, notAsSent, parseWithinDepth } from "../../src/shared/json-text.ts";
import type { HostTool } from "../../src/shared/config-schema.ts";
import type { CallBudget } from "./outcome.ts";
import { toolFetch } from "./tool-fetch.ts";

/**
 * Bound on an MCP server's initialize answer, bytes: it is outside `max_output_bytes` (it is not
 * the call's output), and capabilities, server info and instructions fit in far less.
 */
export const INIT_ANSWER_BYTES = 1024 * 1024;

/**
 * After the `tools/call` response body has ended, how long the SDK gets to hand over the result it
 * held, ms: it parses what it read within a few turns of the event loop. A body that ended without
 * the result (an SSE stream closed early, undecodable JSON, a response to another request id) would
 * otherwise leave the call waiting for its whole timeout.
 */
const RESULT_AFTER_END_MS = 100;

/** Why the answer was refused, for the call's result: set before the budget stops as `invalid`. */
export type Broken = { why?: string };

export function watchedFetch(tool: HostTool, budget: CallBudget, broken: Broken): typeof fetch {
  let bytes = 0;
  let initBytes = 0;
  let awaitingResume = false;
  const refuse = (why: string) => {
    broken.why ??= why;
    budget.stop("invalid");
  };
  return async (input, init) => {
    const res = await toolFetch(input, { ...init, redirect: "manual" });
    const method = rpcMethod(init);
    const resume = init?.method === "GET" && new Headers(init.headers).has("last-event-id");
    if (resume && awaitingResume && !res.ok) budget.stop("no_result");
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel().catch(() => {});
      const headers = new Headers(res.headers);
      headers.delete("location");
      return new Response(null, { status: res.status, statusText: res.statusText, headers });
    }
    if (!res.body) return res;
    // An error answer's body is bounded like any other (the SDK reads all of it for its message);
    // only a success's messages are held to the strict JSON.
    const strict = res.ok;
    const initialize = method === "initialize";
    const call = method === "tools/call";
    const sse = res.headers.get("content-type")?.startsWith("text/event-stream") === true;
    let resumable = false;
    let text = "";
    const decoder = new TextDecoder("utf-8", { fatal: true });
    const messages: string[] = [];
    const events = sse ? createParser({ onEvent: (e) => messages.push(e.data) }) : undefined;
    /** Decodes and checks a chunk (undefined: the end); the reason it is refused, or null. */
    const check = (chunk: Uint8Array | undefined): string | null => {
      if (!strict) return null;
      let decoded: string;
      try {
        decoded = chunk ? decoder.decode(chunk, { stream: true }) : decoder.decode();
      } catch {
        return "sent a response that is not UTF-8";
      }
      if (call && sse && !resumable) resumable = /(^|\n)id:/.test(text.slice(-4) + decoded);
      if (events) {
        text = (text + decoded).slice(-4);
        events.feed(decoded);
        for (const m of messages.splice(0)) {
          const problem = jsonProblem(m);
          if (problem) return problem;
        }
        return null;
      }
      text += decoded;
      return chunk ? null : jsonProblem(text);
    };
    const reader = res.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (err) {
          if (call) budget.stop("dropped");
          controller.error(err);
          return;
        }
        const problem = check(chunk.done ? undefined : chunk.value);
        if (problem) {
          refuse(problem);
          controller.error(new Error(problem));
          return;
        }
        if (chunk.done) {
          if (call && resumable) awaitingResume = true;
          if (call && !resumable) setTimeout(() => budget.stop("no_result"), RESULT_AFTER_END_MS).unref?.();
          return controller.close();
        }
        // Past a bound the body goes no further: the SDK would hold all of it in memory.
        if (initialize && (initBytes += chunk.value.byteLength) > INIT_ANSWER_BYTES) {
          refuse(`sent an initialize answer over ${INIT_ANSWER_BYTES} bytes`);
          return controller.error(new Error("initialize answer too large"));
        }
        if (!initialize && (bytes += chunk.value.byteLength) > tool.max_output_bytes) {
          budget.stop("oversize");
          return controller.error(new Error("over max_output_bytes"));
        }
        controller.enqueue(chunk.value);
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/**
 * Why a JSON message cannot be taken as sent, or null. A syntax error is left to the SDK, which
 * reports what it cannot parse; a blank body (a `202` to a notification) holds no message.
 */
function jsonProblem(text: string): string | null {
  if (text.trim() === "") return null;
  const parsed = parseWithinDepth(text);
  if ("deep" in parsed) return `sent JSON nested deeper than ${MAX_JSON_DEPTH} levels`;
  if ("syntax" in parsed) return null;
  const lost = notAsSent(text, parsed.value);
  if (!lost) return null;
  return "unkept" in lost ? `sent JSON that cannot be recorded as sent (${lost.unkept})` : `sent JSON that gives ${lost.repeated} more than once`;
}

/** The JSON-RPC method a POST carries (undefined for a GET, a DELETE or a batch). */
function rpcMethod(init: RequestInit | undefined): string | undefined {
  if (init?.method !== "POST" || typeof init.body !== "string") return undefined;
  try {
    const method = (JSON.parse(init.body) as { method?: unknown }).method;
    return typeof method === "string" ? method : undefined;
  } catch {
    return undefined;
  }
}
