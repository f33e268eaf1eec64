// The one Node API the Worker uses (nodejs_compat): a synchronous HMAC, so cursors can be minted
// inside a synchronous publish without reordering events around an await.
declare module "node:crypto" {
  interface Hmac {
    update(data: string | Uint8Array): Hmac;
    digest(): Uint8Array;
  }
  export function createHmac(algorithm: "sha256", key: string | Uint8Array): Hmac;
}
declare module "node:crypto" {
  interface Hash {
    update(data: string | Uint8Array): Hash;
    digest(encoding: "hex"): string;
  }
  export function createHash(algorithm: "sha256"): Hash;
}
