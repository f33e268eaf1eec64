/**
 * Strict JSON request bodies: a size cap that holds for chunked bodies too, one JSON object with
 * nothing after it, and a strict zod schema (unknown fields are errors). A body the service answers
 * without using is read and dropped first (bounded), so the client can read the answer.
 */
import type { Context, MiddlewareHandler } from "hono";
import type * as z from "zod";
import { concatBytes } from "../shared/bytes.ts";
import { invalid, ServiceError, tooLarge } from "../shared/errors.ts";
import { issueSummary } from "../shared/zod-issues.ts";
import { MAX_JSON_DEPTH, notAsSent, parseWithinDepth } from "../shared/json-text.ts";

/** The body cap is `limits.input_bytes` plus this many bytes of envelope (docs/api.md "Limits"). */
export const BODY_OVERHEAD_BYTES = 16 * 1024;
/**
 * Most of a body the service reads and drops when it answers without using it (over the cap, or
 * refused before it was read: 401, 403, 404, ...), bytes. Answering while the client is still
 * sending and then closing makes most clients (fetch among them) fail with a reset instead of
 * reading the answer. Four times the largest body cap (1 MiB + 16 KiB) covers any honest
 * mistake; a larger body gets the answer at once and the connection closes.
 */
export const DISCARD_MAX_BYTES = 4 * 1024 * 1024;
/**
 * Longest a body may go without a byte, ms: the runtime bounds a request's headers (15 s) but not
 * its body, so a client that stops mid-body (a lying `Content-Length`, a chunked body never ended)
 * would hold the request, and its answer, forever. The same 15 s as for headers.
 */
export const BODY_STALL_MS = 15_000;
/**
 * Longest a body may take in all, ms: a client trickling a byte every few seconds never stalls, and
 * would hold its request (and, unauthenticated, a refusal draining 4 MiB) for days. The largest body
 * (1 MiB + 16 KiB) fits in 120 s at under 9 KB/s.
 */
export const BODY_TOTAL_MS = 120_000;

/** Thrown when the body stalled or ran out of time; the reader is cancelled by then. */
class BodyStalled extends Error {}

/**
 * Reads a body's chunks under its two clocks: no chunk for BODY_STALL_MS, or none before
 * `deadline` (epoch ms), cancels the reader and fails the read with `BodyStalled`. One timer for the
 * whole body, moved on only when it fires: a timer per chunk (two for a one-chunk body, each
 * set and cleared) was ~2.5% of the Worker's CPU per turn under load.
 */
function timedReader(reader: ReadableStreamDefaultReader<Uint8Array>, deadline: number) {
  let last = Date.now();
  let stalled = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const check = () => {
    const now = Date.now();
    const due = Math.min(last + BODY_STALL_MS, deadline);
    if (now < due) return void (timer = setTimeout(check, due - now));
    timer = undefined;
    stalled = true;
    void reader.cancel().catch(() => {}); // a pending read then ends; cancelling is all there is left to do
  };
  timer = setTimeout(check, Math.max(0, Math.min(BODY_STALL_MS, deadline - last)));
  return {
    /** The next chunk, or `BodyStalled`. */
    async read(): ReturnType<ReadableStreamDefaultReader<Uint8Array>["read"]> {
      let r: Awaited<ReturnType<ReadableStreamDefaultReader<Uint8Array>["read"]>>;
      try {
        r = await reader.read();
      } catch (e) {
        throw stalled ? new BodyStalled() : e;
      }
      if (stalled) throw new BodyStalled(); // the cancel ended the read: what came is not the whole body
      last = Date.now();
      return r;
    },
    stop: () => timer !== undefined && clearTimeout(timer),
  };
}

/**
 * The body as text, at most `cap` bytes: a declared `Content-Length` over the cap is refused before
 * reading, a chunked body is counted while it is read; either way the rest is dropped and the
 * answer is `413`. It runs inside the handler, so authentication and permission errors still come
 * before `413`.
 */
export async function readBody(c: Context, cap: number): Promise<string> {
  const req = c.req.raw;
  if (!req.body) return "";
  const reader = req.body.getReader();
  const declared = declaredLength(req);
  // A compressed body would be parsed as its compressed bytes: refused by name instead.
  const coding = encodingOf(req);
  if (coding !== null) {
    await discard(reader, 0, declared);
    throw invalid(`${coding}: the service takes request bodies uncompressed (identity) only`);
  }
  if (declared !== undefined && declared > cap) {
    await discard(reader, 0, declared);
    throw tooLarge(cap);
  }
  const parts: Uint8Array[] = [];
  let size = 0;
  const deadline = Date.now() + BODY_TOTAL_MS;
  const chunks = timedReader(reader, deadline);
  try {
    for (;;) {
      const { done, value } = await chunks.read();
      if (done) break;
      size += value.byteLength;
      if (size > cap) {
        await discard(reader, size, declared);
        throw tooLarge(cap);
      }
      parts.push(value);
    }
  } catch (e) {
    if (e instanceof ServiceError) throw e;
    if (e instanceof BodyStalled) {
      throw invalid(Date.now() >= deadline ? `request body too slow: not complete within ${BODY_TOTAL_MS / 1000} s` : `request body stalled: no bytes for ${BODY_STALL_MS / 1000} s`);
    }
    // The client stopped sending before the body was complete (a Content-Length longer than the
    // bytes sent, a dropped chunked body): its fault, not ours.
    throw invalid("request body ended before it was complete");
  } finally {
    chunks.stop();
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(concatBytes(parts));
  } catch {
    throw invalid("request body is not valid UTF-8");
  }
}

/**
 * After any handler: a body nobody read (the request was refused first) is dropped before the
 * answer. Also when `next` throws: an unknown route's 404 is thrown past the middleware to the
 * error handler (Hono's not-found handler runs outside its handler try), and an unread chunked
 * body then made the runtime reset the connection instead of answering.
 */
export const discardUnreadBody: MiddlewareHandler = async (c, next) => {
  try {
    await next();
  } finally {
    const req = c.req.raw;
    if (req.body && !req.bodyUsed) await discard(req.body.getReader(), 0, declaredLength(req));
  }
};

/**
 * Reads and drops the rest of a body of which `seen` bytes were read, up to DISCARD_MAX_BYTES in
 * all; a body declared or found larger is cancelled (the connection then closes). Never throws.
 */
async function discard(reader: ReadableStreamDefaultReader<Uint8Array>, seen: number, declared: number | undefined): Promise<void> {
  const chunks = timedReader(reader, Date.now() + BODY_TOTAL_MS);
  try {
    let size = seen;
    while (size <= DISCARD_MAX_BYTES && (declared === undefined || declared <= DISCARD_MAX_BYTES)) {
      const { done, value } = await chunks.read();
      if (done) return;
      size += value.byteLength;
    }
    await reader.cancel();
  } catch {
    // The client stopped sending, or stalled (the reader is cancelled): nothing is left to drop.
  } finally {
    chunks.stop();
  }
}

/**
 * A `Content-Encoding` other than `identity`, or a `Transfer-Encoding` besides `chunked`, as the
 * header it came in (`Content-Encoding: gzip`); null when the body is plain.
 */
function encodingOf(req: Request): string | null {
  const ce = req.headers.get("content-encoding");
  if (ce !== null && ce.split(",").some((t) => !["", "identity"].includes(t.trim().toLowerCase()))) return `Content-Encoding: ${ce.slice(0, 64)}`;
  const te = req.headers.get("transfer-encoding");
  if (te !== null && te.split(",").some((t) => !["", "chunked"].includes(t.trim().toLowerCase()))) return `Transfer-Encoding: ${te.slice(0, 64)}`;
  return null;
}

/** The declared `Content-Length` (the runtime holds the body to it), absent for chunked bodies. */
function declaredLength(req: Request): number | undefined {
  const v = req.headers.get("content-length");
  return v === null || req.headers.has("transfer-encoding") ? undefined : Number(v);
}

/**
 * Parses a body against a strict schema. `emptyAs` is used when the body is empty or blank; `first`
 * sees the JSON object before the schema does, for a rule the docs order before the fields' own.
 */
export function parseBody<S extends z.ZodType>(text: string, schema: S, emptyAs?: unknown, first?: (body: Record<string, unknown>) => void): z.output<S> {
  let value: unknown;
  if (text.trim() === "") {
    if (emptyAs === undefined) throw invalid("request body is required");
    value = emptyAs;
  } else {
    const parsed = parseWithinDepth(text);
    if ("deep" in parsed) throw invalid(`request body nests deeper than ${MAX_JSON_DEPTH} levels`);
    if ("syntax" in parsed) throw invalid(`malformed JSON: ${parsed.syntax}`);
    value = parsed.value;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalid("request body must be a JSON object");
  }
  // Anywhere in the body, free-form members (`bindings[].parameters`) included.
  const lost = notAsSent(text, value);
  if (lost) throw invalid("unkept" in lost ? lost.unkept : `${lost.repeated}: the member is given more than once`);
  first?.(value as Record<string, unknown>);
  const r = schema.safeParse(value);
  if (!r.success) throw invalid(issueSummary(r.error.issues));
  return r.data;
}
