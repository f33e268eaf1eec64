/**
 * What the model sends, fitted to what a protocol line may carry. The protocol bounds a tool call id
 * (1 to MAX_CALL_ID_CHARS) and a line (`max_line_bytes`), and the runner-host ends the whole
 * process on a line that breaks either, with every session in it: a provider that sends a call
 * without an id, or a 9 MiB reply, must fail only its own turn, or nothing.
 * - A call id out of bounds travels under an id of the harness's own, mapped back for its result.
 * - A delta too large for a line is split into several (deltas are text to concatenate).
 * - Any other event too large for a line is not written; the turn fails with `service_error`.
 */
import { randomUUID } from "node:crypto";
import { DEFAULT_MAX_LINE_BYTES, serializeJsonLine } from "../harness/jsonl.ts";
import { MAX_CALL_ID_CHARS, type SessionEvent } from "../harness/protocol.ts";

/**
 * Longest delta text per line, UTF-16 units: each unit is at most 6 bytes as JSON (`\u001f`), so
 * a delta this long stays far below the line limit whatever it holds.
 */
export const MAX_DELTA_CHARS = 256 * 1024;

/** Tool call ids as the provider gave them and as they go on the wire, for one session. */
export class CallIds {
  readonly #toWire = new Map<string, string>();
  readonly #fromWire = new Map<string, string>();

  /** The id the protocol carries for the provider's `id`: itself when it fits. */
  wire(id: string): string {
    if (id.length >= 1 && id.length <= MAX_CALL_ID_CHARS) return id;
    let w = this.#toWire.get(id);
    if (w === undefined) {
      w = `svc-call-${randomUUID()}`;
      this.#toWire.set(id, w);
      this.#fromWire.set(w, id);
    }
    return w;
  }

  /** The provider's id for a wire id (a `tool_result`'s `call_id`). */
  provider(wireId: string): string {
    return this.#fromWire.get(wireId) ?? wireId;
  }

  /** At a turn's end: no result can come for its calls any more. */
  clear(): void {
    this.#toWire.clear();
    this.#fromWire.clear();
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
