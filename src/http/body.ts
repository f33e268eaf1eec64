/**
 * Strict JSON request bodies: a size cap that holds for chunked bodies too, one JSON object with
 * nothing after it, and a strict zod schema (unknown fields are errors).
 */
import type { z } from "zod";
import { invalid, tooLarge } from "../shared/errors.ts";
import { issueSummary } from "../shared/zod-issues.ts";

/** Spec "Limits": the body cap is `limits.input_bytes` plus this many bytes of envelope. */
export const BODY_OVERHEAD_BYTES = 16 * 1024;

export async function readBody(req: Request, cap: number): Promise<string> {
  const declared = req.headers.get("Content-Length");
  if (declared !== null && Number(declared) > cap) throw tooLarge(cap);
  if (!req.body) return "";
  // Count while reading: a chunked body has no length to check up front.
  const reader = req.body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
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
