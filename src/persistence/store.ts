/**
 * The one interface every persistence provider implements (spec "Persistence settings"). The
 * uploader only ever creates immutable objects, overwrites one small pointer per session, reads
 * objects back for restore and load, and deletes what a restore cut off.
 */

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
