/** Base64 helpers on web-standard APIs (atob/btoa), usable in workerd and Node alike. */

export function toBase64(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

/** Standard base64 (padding optional); throws on invalid input. */
export function fromBase64(s: string): Uint8Array<ArrayBuffer> {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

const URL_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/**
 * Base64url without padding, straight from the bytes: every event's cursor is one (36 characters),
 * and going through `btoa` and three replacements cost more than the MAC inside it.
 */
export function toBase64Url(bytes: Uint8Array): string {
  const A = URL_ALPHABET;
  let s = "";
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    s += A[n >>> 18]! + A[(n >>> 12) & 63]! + A[(n >>> 6) & 63]! + A[n & 63]!;
  }
  if (i + 1 === bytes.length) {
    const n = bytes[i]! << 16;
    s += A[n >>> 18]! + A[(n >>> 12) & 63]!;
  } else if (i + 2 === bytes.length) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    s += A[n >>> 18]! + A[(n >>> 12) & 63]! + A[(n >>> 6) & 63]!;
  }
  return s;
}

/** Base64url without padding; undefined for invalid input. */
export function fromBase64Url(s: string): Uint8Array<ArrayBuffer> | undefined {
  try {
    return fromBase64(s.replace(/-/g, "+").replace(/_/g, "/"));
  } catch {
    return undefined;
  }
}
