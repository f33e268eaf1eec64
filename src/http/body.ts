/**
 * Strict JSON request bodies: a size cap that holds for chunked bodies too, one JSON object with
 * nothing after it, and a strict zod schema (unknown fields are errors).
 */
import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { z } from "zod";
import { invalid, ServiceError, tooLarge } from "../shared/errors.ts";
import { issueSummary } from "../shared/zod-issues.ts";

/** Spec "Limits": the body cap is `limits.input_bytes` plus this many bytes of envelope. */
export const BODY_OVERHEAD_BYTES = 16 * 1024;
/**
 * Deepest nesting of arrays and objects a request body may have, levels. Schema checks, JSON
 * Schema validation, serialisation and structured clone all recurse; a body nested thousands deep
 * would overflow the stack in one of them. 64 is far beyond any real session config or tool schema.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * The body as text. The cap is hono's `bodyLimit`: it trusts a declared `Content-Length` (the
 * runtime holds the body to it) and counts a chunked body while reading it, so neither form gets
 * more than `cap` bytes in. It runs here, inside the handler, so authentication and permission
 * errors still come before `413`.
 */
export async function readBody(c: Context, cap: number): Promise<string> {
  const limit = bodyLimit({
    maxSize: cap,
    onError: () => {
      throw tooLarge(cap);
    },
  });
  let bytes: Uint8Array;
  try {
    await limit(c, async () => {});
    bytes = new Uint8Array(await c.req.arrayBuffer());
  } catch (e) {
    if (e instanceof ServiceError) throw e;
    // The client stopped sending before the body was complete (a Content-Length longer than the
    // bytes sent, a dropped chunked body): its fault, not ours.
    throw invalid("request body ended before it was complete");
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
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
  if (!r.success) throw invalid(issueSummary(r.error.issues));
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

