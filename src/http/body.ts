/**
 * Strict JSON request bodies: a size cap that holds for chunked bodies too, one JSON object with
 * nothing after it, and a strict zod schema (unknown fields are errors).
 */
import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { z } from "zod";
import { invalid, tooLarge } from "../shared/errors.ts";
import { issueSummary } from "../shared/zod-issues.ts";

/** Spec "Limits": the body cap is `limits.input_bytes` plus this many bytes of envelope. */
export const BODY_OVERHEAD_BYTES = 16 * 1024;

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
  await limit(c, async () => {});
  const bytes = new Uint8Array(await c.req.arrayBuffer());
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
