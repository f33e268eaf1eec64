/** Ids: 32 lowercase hex characters from a CSPRNG (docs/api.md "Events"). */

/** An id as the service issues and sends it: 32 lowercase hex characters. */
export const ID_PATTERN = /^[a-f0-9]{32}$/;
/**
 * An id as a client may write it (a path segment, a token's `session`, a binding's `executor`):
 * either case is accepted and compared lowercase. Spelled without the `i` flag so it carries over
 * as is into the OpenAPI document's JSON Schema `pattern` (which has no flags).
 */
export const ID_ANY_CASE_PATTERN = /^[a-fA-F0-9]{32}$/;

export function newId(): string {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return toHex(b);
}

export function toHex(bytes: Uint8Array): string {
  let s = "";
  for (const x of bytes) s += x.toString(16).padStart(2, "0");
  return s;
}

/** True for an id as a client may write it (either case). */
export function isId(s: string): boolean {
  return ID_ANY_CASE_PATTERN.test(s);
}

const encoder = new TextEncoder();

/** UTF-8 byte length: the spec's `input_bytes` and tenant limits count bytes, not characters. */
export function byteLength(s: string): number {
  return encoder.encode(s).length;
}

export async function sha256Hex(s: string): Promise<string> {
  return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(s))));
}
