// The Node APIs the Worker uses (nodejs_compat): a synchronous HMAC, so cursors can be minted
// inside a synchronous publish without reordering events around an await, and the constant-time
// comparison that checks them.
declare module "node:crypto" {
  interface Hmac {
    update(data: string | Uint8Array): Hmac;
    digest(): Uint8Array;
  }
  export function createHmac(algorithm: "sha256", key: string | Uint8Array): Hmac;
  export function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean;
}
declare module "node:crypto" {
  interface Hash {
    update(data: string | Uint8Array): Hash;
    digest(encoding: "hex"): string;
  }
  export function createHash(algorithm: "sha256"): Hash;
}
