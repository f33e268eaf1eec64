/**
 * What the model sends, fitted to what a protocol line may carry. The protocol bounds a tool call id
 * (1 to MAX_CALL_ID_CHARS) and a line (`max_line_bytes`), and the runner-host ends the whole
 * process on a line that breaks either, with every session in it: a provider that sends a call
 * without an id, or a 9 MiB reply, must fail only its own turn, or nothing.
 * - A call id out of bounds, or repeated in one message, is replaced by one of the harness's own.
 * - A delta too large for a line is split into several (deltas are text to concatenate).
 * - Any other event too large for a line is not written; the turn fails with `service_error`.
 */
import { randomBytes } from "node:crypto";
import type { AssistantMessage } from "@mariozechner/pi-ai";
import { DEFAULT_MAX_LINE_BYTES, serializeJsonLine } from "../harness/jsonl.ts";
import { MAX_CALL_ID_CHARS, type SessionEvent } from "../harness/protocol.ts";

/**
 * Longest delta text per line, UTF-16 units: each unit is at most 6 bytes as JSON (`\u001f`), so
 * a delta this long stays far below the line limit whatever it holds.
 */
export const MAX_DELTA_CHARS = 256 * 1024;

/**
 * Gives every tool call of a finished assistant message an id the protocol carries and no other call
 * of the message has: a provider's empty id (some OpenAI-compatible servers send none), one over
 * MAX_CALL_ID_CHARS, or a repeat becomes `call_svc` + 24 hex (32 characters of `[A-Za-z0-9_]`, which
 * every provider API takes back in the next request). In place: pi runs the calls, records them and
 * sends them on from this very message.
 */
export function fitCallIds(message: AssistantMessage): void {
  const seen = new Set<string>();
  for (const c of message.content) {
    if (c.type !== "toolCall") continue;
    if (c.id.length < 1 || c.id.length > MAX_CALL_ID_CHARS || seen.has(c.id)) c.id = `call_svc${randomBytes(12).toString("hex")}`;
    seen.add(c.id);
  }
}

/** `text` in pieces of at most MAX_DELTA_CHARS, never splitting a surrogate pair. */
export function deltaPieces(text: string): string[] {
  if (text.length <= MAX_DELTA_CHARS) return [text];
  const pieces: string[] = [];
  for (let at = 0; at < text.length; ) {
    let end = Math.min(at + MAX_DELTA_CHARS, text.length);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--; // a high surrogate stays with its pair
    pieces.push(text.slice(at, end));
    at = end;
  }
  return pieces;
}

/** The event's line length in bytes when it is over the line limit, else undefined. */
export function oversizeLine(event: SessionEvent, limit = DEFAULT_MAX_LINE_BYTES): number | undefined {
  const bytes = Buffer.byteLength(serializeJsonLine(event as unknown as Parameters<typeof serializeJsonLine>[0]));
  return bytes > limit ? bytes : undefined;
}
