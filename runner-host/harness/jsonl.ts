/**
 * Strict JSON-lines framing for `svc-harness/1` (docs/harness-protocol.md "Transport").
 *
 * - Lines end at `\n` only. `readline` is not used: it also splits on U+2028/U+2029, which are
 *   legal inside JSON strings. One trailing `\r` is stripped.
 * - Bytes are decoded with a StringDecoder, so a UTF-8 sequence split across chunks survives.
 * - An unparsable line, a line that is not a JSON object, a line longer than the maximum or nesting
 *   deeper than MAX_LINE_DEPTH, and bytes left without a final `\n` at end of stream are framing
 *   errors. Nothing is skipped:
 *   after the first error the decoder is poisoned and yields nothing more, because the caller
 *   ends the peer on a framing violation anyway.
 */
import { StringDecoder } from "node:string_decoder";
import type { Readable } from "node:stream";
import { nestingExceeds } from "../../src/shared/json-text.ts";
import { wellFormed } from "../../src/shared/json-values.ts";

/** A JSON escape of a UTF-16 surrogate (`\ud800`–`\udfff`), the only way a line can carry a lone one. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;

/**
 * Longest line either end may send, in UTF-8 bytes: a 4 MiB native record plus a 2 MiB tool
 * output plus envelope overhead (docs/harness-protocol.md).
 */
export const DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024;

/**
 * Deepest nesting of arrays and objects a line may have, levels (the line's object is level 1).
 * Whatever reads or writes a line again (schema checks, redaction, JSON.stringify) recurses, and a
 * value nested thousands deep overflows the stack: a model's tool arguments, a harness's native
 * record. 128 holds a native record of 125 levels inside an `open` (docs/harness-protocol.md).
 */
export const MAX_LINE_DEPTH = 128;

/** Whether a line nests past MAX_LINE_DEPTH (both ends check: what the runner-host writes and reads). */
export function lineTooDeep(line: string): boolean {
  return nestingExceeds(line, MAX_LINE_DEPTH);
}

export type JsonObject = Record<string, unknown>;

export class FramingError extends Error {
  override name = "FramingError";
}

export type DecodeResult = { ok: true; value: JsonObject } | { ok: false; error: FramingError };

/** Push-style decoder: feed chunks, get complete messages (or one error) back. */
export class JsonlDecoder {
  readonly maxLineBytes: number;
  #decoder = new StringDecoder("utf8");
  /**
   * The unfinished line, as the pieces it arrived in, and its UTF-8 bytes: joined once, when its
   * `\n` comes. (One growing string would be flattened by every scan: quadratic in a long line.)
   */
  #parts: string[] = [];
  #partBytes = 0;
  #failed = false;

  /** Applied to a bad line before any of it is quoted: a quote is cut, and a cut secret no longer matches. */
  readonly #scrub: (line: string) => string;

  constructor(maxLineBytes = DEFAULT_MAX_LINE_BYTES, scrub: (line: string) => string = (l) => l) {
    this.maxLineBytes = maxLineBytes;
    this.#scrub = scrub;
  }

  get failed(): boolean {
    return this.#failed;
  }

  push(chunk: Buffer | string): DecodeResult[] {
    if (this.#failed) return [];
    const text = typeof chunk === "string" ? chunk : this.#decoder.write(chunk);
    const out: DecodeResult[] = [];
    let start = 0;
    for (let nl = text.indexOf("\n"); nl !== -1; nl = text.indexOf("\n", start)) {
      let line = text.slice(start, nl);
      if (this.#parts.length > 0) {
        line = this.#parts.join("") + line;
        this.#parts = [];
        this.#partBytes = 0;
      }
      const result = this.#parseLine(line);
      out.push(result);
      start = nl + 1;
      if (!result.ok) return this.#fail(out);
    }
    if (start < text.length) {
      const rest = start === 0 ? text : text.slice(start);
      this.#parts.push(rest);
      this.#partBytes += Buffer.byteLength(rest, "utf8");
      // An unfinished line past the maximum (one byte more for a final `\r`) can never be valid:
      // refused now, holding no more than the maximum in memory.
      if (this.#partBytes > this.maxLineBytes + 1) {
        out.push(this.#error(`line exceeds ${this.maxLineBytes} bytes`));
        return this.#fail(out);
      }
    }
    return out;
  }

  /** End of stream: a partial line left over means the peer was cut off mid-message. */
  end(): DecodeResult[] {
    if (this.#failed) return [];
    const tail = this.#parts.join("") + this.#decoder.end();
    if (tail.length === 0) return [];
    return this.#fail([this.#error(`stream ended inside a line (${tail.length} chars without \\n)`)]);
  }

  #parseLine(raw: string): DecodeResult {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    // A UTF-16 unit is at most 3 UTF-8 bytes: short lines (nearly all) skip the byte count.
    if (line.length * 3 > this.maxLineBytes && Buffer.byteLength(line, "utf8") > this.maxLineBytes) {
      return this.#error(`line exceeds ${this.maxLineBytes} bytes`);
    }
    if (lineTooDeep(line)) {
      return this.#error(`line nests deeper than ${MAX_LINE_DEPTH} levels`);
    }
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      // Not JSON.parse's message: it quotes the line around the error, unscrubbed.
      return this.#error(`unparsable line (not JSON); starts with ${preview(this.#scrub(line))}`);
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      return this.#error(`line is not a JSON object: ${preview(this.#scrub(line))}`);
    }
    // A lone surrogate (`"\ud800"`, a model's broken output) holds in no UTF-8 text: recorded as
    // U+FFFD, as every reader and tool would get it. Only an escape can carry one, so lines
    // without a surrogate escape (nearly all) skip the walk.
    if (SURROGATE_ESCAPE.test(line)) wellFormed(value);
    return { ok: true, value: value as JsonObject };
  }

  #error(message: string): DecodeResult {
    return { ok: false, error: new FramingError(message) };
  }

  #fail(out: DecodeResult[]): DecodeResult[] {
    this.#failed = true;
    this.#parts = [];
    this.#partBytes = 0;
    return out;
  }
}

/** First characters of a bad line, JSON-quoted, for an error message that cannot flood logs. */
function preview(line: string): string {
  const PREVIEW_CHARS = 80;
  return JSON.stringify(line.length > PREVIEW_CHARS ? `${line.slice(0, PREVIEW_CHARS)}…` : line);
}

export interface JsonlReaderHandlers {
  onMessage(value: JsonObject): void;
  onError(error: FramingError): void;
  /** The stream ended cleanly (no partial line). */
  onEnd?(): void;
}

/** Reads a byte stream as JSON lines. Returns a function that detaches the listeners. */
export function attachJsonlReader(
  stream: Readable,
  handlers: JsonlReaderHandlers,
  maxLineBytes = DEFAULT_MAX_LINE_BYTES,
  scrub?: (line: string) => string,
): () => void {
  const decoder = new JsonlDecoder(maxLineBytes, scrub);
  const deliver = (results: DecodeResult[]) => {
    for (const r of results) {
      if (r.ok) handlers.onMessage(r.value);
      else handlers.onError(r.error);
    }
  };
  const onData = (chunk: Buffer | string) => deliver(decoder.push(chunk));
  const onEnd = () => {
    const failedBefore = decoder.failed;
    deliver(decoder.end());
    if (!failedBefore && !decoder.failed) handlers.onEnd?.();
  };
  stream.on("data", onData);
  stream.on("end", onEnd);
  return () => {
    stream.off("data", onData);
    stream.off("end", onEnd);
  };
}

/** One object, one line. JSON.stringify escapes raw newlines inside strings, so `\n` only ends lines. */
export function serializeJsonLine(value: JsonObject): string {
  return `${JSON.stringify(value)}\n`;
}
