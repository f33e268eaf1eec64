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

export function toBase64Url(bytes: Uint8Array): string {
  return toBase64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Base64url without padding; undefined for invalid input. */
export function fromBase64Url(s: string): Uint8Array<ArrayBuffer> | undefined {
  try {
    return fromBase64(s.replace(/-/g, "+").replace(/_/g, "/"));
  } catch {
    return undefined;
  }
}
