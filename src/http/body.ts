/**
 * Strict JSON request bodies: a size cap that holds for chunked bodies too, one JSON object with
 * nothing after it, and a strict zod schema (unknown fields are errors).
 */
import type { z } from "zod";
import { invalid, tooLarge } from "../shared/errors.ts";

/** Spec "Limits": the body cap is `limits.input_bytes` plus this many bytes of envelope. */
export const BODY_OVERHEAD_BYTES = 16 * 1024;
/**
 * Deepest nesting of arrays and objects a request body may have, levels. Schema checks, JSON
 * Schema validation, serialisation and structured clone all recurse; a body nested thousands deep
 * would overflow the stack in one of them. 64 is far beyond any real session config or tool schema.
 */
export const MAX_JSON_DEPTH = 64;

export async function readBody(req: Request, cap: number): Promise<string> {
  const declared = req.headers.get("Content-Length");
  if (declared !== null && Number(declared) > cap) throw tooLarge(cap);
  if (!req.body) return "";
  // Count while reading: a chunked body has no length to check up front.
  const reader = req.body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
    try {
      chunk = await reader.read();
    } catch {
      // The client stopped sending before the body was complete (a Content-Length longer than the
      // bytes sent, a dropped chunked body): its fault, not ours.
      throw invalid("request body ended before it was complete");
    }
    const { done, value } = chunk;
    if (done) break;
    total += value.byteLength;
    if (total > cap) {
      await reader.cancel().catch(() => {});
      throw tooLarge(cap);
    }
    parts.push(value);
  }
  const all = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.byteLength;
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(all);
  } catch {
    throw invalid("request body is not valid UTF-8");
  }
}

/** Parses a body against a strict schema. `emptyAs` is used when the body is empty or blank. */
export function parseBody<S extends z.ZodType>(text: string, schema: S, emptyAs?: unknown): z.output<S> {
  let value: unknown;
  if (text.trim() === "") {
    if (emptyAs === undefined) throw invalid("request body is required");
    value = emptyAs;
  } else {
    // Before anything recursive sees the value: JSON.parse itself copes, what comes after may not.
    if (nestingExceeds(text, MAX_JSON_DEPTH)) throw invalid(`request body nests deeper than ${MAX_JSON_DEPTH} levels`);
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw invalid(`malformed JSON: ${e instanceof Error ? e.message : "parse error"}`);
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalid("request body must be a JSON object");
  }
  const r = schema.safeParse(value);
  if (!r.success) throw invalid(describeIssues(r.error.issues));
  return r.data;
}

/**
 * Whether the JSON text opens more than `limit` arrays or objects inside each other. Brackets inside
 * strings do not count; the text need not be valid JSON (the parser judges that afterwards).
 */
export function nestingExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i++; // backslash: skip the escaped character
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x7b || ch === 0x5b) {
      if (++depth > limit) return true;
    } else if (ch === 0x7d || ch === 0x5d) depth--;
  }
  return false;
}

export function describeIssues(issues: z.core.$ZodIssue[]): string {
  return issues
    .slice(0, 5)
    .map((i) => {
      const path = i.path.map(String).join(".");
      if (i.code === "unrecognized_keys") {
        return i.keys.map((k) => `unknown field "${path ? `${path}.${k}` : k}"`).join("; ");
      }
      return path ? `${path}: ${i.message}` : i.message;
    })
    .join("; ");
}
