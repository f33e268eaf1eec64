/** Ids: 32 lowercase hex characters from a CSPRNG (docs/api.md "Events"). */

/** An id as the service issues and sends it: 32 lowercase hex characters. */
export const ID_PATTERN = /^[a-f0-9]{32}$/;
/**
 * An id as a client may write it (a path segment, a token's `session`, a binding's `executor`):
 * either case is accepted and compared lowercase. Spelled without the `i` flag so it carries over
 * as is into the OpenAPI document's JSON Schema `pattern` (which has no flags).
 */
export const ID_ANY_CASE_PATTERN = /^[a-fA-F0-9]{32}$/;

/**
 * Random bytes drawn from the CSPRNG this many at a time (bytes): an object gives every live delta
 * an id, and one `getRandomValues` per id was ~3% of workerd's CPU in a turn (bench/RESULTS.md
 * "First output, round 5"); 256 ids per call. Filled on first use: workerd refuses random values
 * at module scope.
 */
const POOL_BYTES = 4096;
const pool = new Uint8Array(POOL_BYTES);
let poolAt = POOL_BYTES;

export function newId(): string {
  if (poolAt + 16 > POOL_BYTES) {
    crypto.getRandomValues(pool);
    poolAt = 0;
  }
  const id = toHex(pool.subarray(poolAt, poolAt + 16));
  poolAt += 16;
  return id;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

export function toHex(bytes: Uint8Array): string {
  let s = "";
  for (const x of bytes) s += HEX[x];
  return s;
}

/** True for an id as a client may write it (either case). */
export function isId(s: string): boolean {
  return ID_ANY_CASE_PATTERN.test(s);
}

const encoder = new TextEncoder();

/** UTF-8 byte length: `input_bytes` and tenant limits count bytes, not characters. */
export function byteLength(s: string): number {
  return encoder.encode(s).length;
}

export async function sha256Hex(s: string): Promise<string> {
  return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(s))));
}
