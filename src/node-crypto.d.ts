// The Node APIs the Worker uses (nodejs_compat): the constant-time comparison that checks cursors
// and token digests, and a synchronous SHA-256. (A cursor's HMAC is src/shared/hmac-sha256.ts.)
declare module "node:crypto" {
  export function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean;
}
declare module "node:crypto" {
  interface Hash {
    update(data: string | Uint8Array): Hash;
    digest(encoding: "hex"): string;
  }
  export function createHash(algorithm: "sha256"): Hash;
}
