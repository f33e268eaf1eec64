/**
 * The one interface every persistence provider implements (docs/configuration.md "Persistence"). The
 * uploader only ever creates immutable objects, overwrites one small pointer per session, reads
 * objects back for restore and load, and deletes what a restore or a load cut off (a load finds
 * that by listing the session's folder).
 */
import type * as z from "zod";

export interface ObjectStore {
  /** Provider name, for logs. */
  readonly kind: string;
  /**
   * Creates `key` unless it already exists (`If-None-Match: *` or the provider's equivalent). An
   * existing key is success: immutable objects are only ever written with the same content again.
   */
  create(key: string, body: Uint8Array, type: string): Promise<void>;
  /** Writes `key` whatever is there (the session's `latest.json` pointer only). */
  put(key: string, body: Uint8Array, type: string): Promise<void>;
  /** The object's bytes, or null when there is no such object. */
  get(key: string): Promise<Uint8Array | null>;
  /** Removes `key`; a missing key is success. */
  delete(key: string): Promise<void>;
  /** Every key that starts with `prefix` (all pages, in no promised order). */
  list(prefix: string): Promise<string[]>;
}

/**
 * Keys asked for per list call: the most S3, R2 and GCS return in one page. Tests pass a smaller
 * page to each provider to check that the pages are followed.
 */
export const LIST_PAGE = 1000;

/**
 * How long one call to the provider may take, whole answer included, ms. An object is at most a
 * few MiB (a ≤ 64 KiB block, a native checkpoint, a manifest): seconds at any usable bandwidth.
 * A connection that is accepted and never answered must fail the call, so the upload round fails
 * and is retried with backoff (and a lookup answers `500`); without a bound the session would wait
 * on it for good, its uploads stuck even after the store is healthy again.
 */
export const STORE_REQUEST_MS = 20_000;

/** The StoreError for a call that threw: a timeout says so, anything else keeps its message. */
export function callFailure(what: string, e: unknown, timeoutMs: number): StoreError {
  if (e instanceof StoreError) return e;
  if (e instanceof Error && e.name === "TimeoutError") return new StoreError(`${what}: no answer within ${timeoutMs / 1000} s`);
  return new StoreError(`${what} failed: ${e instanceof Error ? e.message : String(e)}`);
}

/** The answer's bytes; a body that stops coming fails like its call (the same signal bounds both). */
export async function answerBytes(what: string, res: Response, timeoutMs: number): Promise<Uint8Array> {
  try {
    return new Uint8Array(await res.arrayBuffer());
  } catch (e) {
    throw callFailure(what, e, timeoutMs);
  }
}

/** A page of a provider's JSON list answer, as `schema` reads it; anything else is a StoreError. */
export async function jsonPage<T>(what: string, res: Response, timeoutMs: number, schema: z.ZodType<T>): Promise<T> {
  const text = decoder.decode(await answerBytes(what, res, timeoutMs));
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const page = schema.safeParse(value);
  if (!page.success) throw new StoreError(`${what}: an answer that is not a page of objects`);
  return page.data;
}

/** A provider answered with something other than success: retried by the uploader with backoff. */
export class StoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StoreError";
  }
}

/** `what failed: HTTP status and the start of the provider's answer` (never a signature or body we sent). */
export async function httpFailure(what: string, res: Response): Promise<StoreError> {
  const text = (await res.text().catch(() => "")).slice(0, 200).replace(/\s+/g, " ");
  return new StoreError(`${what}: HTTP ${res.status}${text ? ` ${text}` : ""}`);
}

export const encoder = new TextEncoder();
export const decoder = new TextDecoder();
