/**
 * HMAC-SHA-256 (RFC 2104 over FIPS 180-4 SHA-256) for many short messages under one key, in plain
 * JavaScript. The key's two padded blocks are hashed once, when the key is taken; each message
 * then costs two or three block compressions and no call into the runtime's crypto. A session's
 * object MACs every event cursor it hands out (src/session/cursor.ts): through `node:crypto`'s
 * `createHmac` each one set up a native HMAC context from the key string, ~6% of the objects'
 * CPU per turn under load (bench/RESULTS.md "Seventeenth session"). The output is the standard
 * HMAC-SHA-256, byte for byte (test/unit/hmac-sha256.test.ts checks it against `node:crypto`).
 */

/** SHA-256 round constants (FIPS 180-4 §4.2.2). */
const K = Uint32Array.of(
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
);
/** SHA-256 initial hash value (FIPS 180-4 §5.3.3). */
const IV = Uint32Array.of(0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19);
/** Bytes per SHA-256 block. */
const BLOCK = 64;
/** Bytes of a SHA-256 digest. */
export const DIGEST_BYTES = 32;

/**
 * Scratch space reused by every call (nothing here yields while using it): typed arrays are cheap
 * to fill but not to make in workerd, where each new one was most of a MAC's cost.
 */
const W = new Uint32Array(64);
const STATE = new Uint32Array(8);
const TAIL = new Uint8Array(2 * BLOCK);
const INNER = new Uint8Array(DIGEST_BYTES);

/** Folds the 64-byte block at `bytes[at..]` into `state` (FIPS 180-4 §6.2.2). */
function compress(state: Uint32Array, bytes: Uint8Array, at: number): void {
  for (let t = 0; t < 16; t++) {
    const i = at + 4 * t;
    W[t] = (bytes[i]! << 24) | (bytes[i + 1]! << 16) | (bytes[i + 2]! << 8) | bytes[i + 3]!;
  }
  for (let t = 16; t < 64; t++) {
    const w15 = W[t - 15]!;
    const w2 = W[t - 2]!;
    const s0 = ((w15 >>> 7) | (w15 << 25)) ^ ((w15 >>> 18) | (w15 << 14)) ^ (w15 >>> 3);
    const s1 = ((w2 >>> 17) | (w2 << 15)) ^ ((w2 >>> 19) | (w2 << 13)) ^ (w2 >>> 10);
    W[t] = (W[t - 16]! + s0 + W[t - 7]! + s1) | 0;
  }
  let a = state[0]!, b = state[1]!, c = state[2]!, d = state[3]!;
  let e = state[4]!, f = state[5]!, g = state[6]!, h = state[7]!;
  for (let t = 0; t < 64; t++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[t]! + W[t]!) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  state[0] = (state[0]! + a) | 0;
  state[1] = (state[1]! + b) | 0;
  state[2] = (state[2]! + c) | 0;
  state[3] = (state[3]! + d) | 0;
  state[4] = (state[4]! + e) | 0;
  state[5] = (state[5]! + f) | 0;
  state[6] = (state[6]! + g) | 0;
  state[7] = (state[7]! + h) | 0;
}

/**
 * Hashes `message[0..length)` on from `start`, a state that has already taken `prefixBytes`
 * (whole blocks), and writes the digest's first `outBytes` bytes to `out` at `outAt`. The message
 * is read whole before anything is written, so `out` may be the message's own buffer. The padding
 * is FIPS 180-4 §5.1.1: 0x80, zeros, the bit length.
 */
function finish(start: Uint32Array, prefixBytes: number, message: Uint8Array, length: number, out: Uint8Array, outAt: number, outBytes: number): void {
  STATE.set(start);
  const whole = length - (length % BLOCK);
  for (let at = 0; at < whole; at += BLOCK) compress(STATE, message, at);
  const rest = length - whole;
  const tailBytes = rest < BLOCK - 8 ? BLOCK : 2 * BLOCK;
  for (let i = 0; i < rest; i++) TAIL[i] = message[whole + i]!;
  TAIL.fill(0, rest, tailBytes);
  TAIL[rest] = 0x80;
  const bits = (prefixBytes + length) * 8;
  const high = Math.floor(bits / 2 ** 32);
  TAIL[tailBytes - 8] = high >>> 24;
  TAIL[tailBytes - 7] = high >>> 16;
  TAIL[tailBytes - 6] = high >>> 8;
  TAIL[tailBytes - 5] = high;
  TAIL[tailBytes - 4] = bits >>> 24;
  TAIL[tailBytes - 3] = bits >>> 16;
  TAIL[tailBytes - 2] = bits >>> 8;
  TAIL[tailBytes - 1] = bits;
  for (let at = 0; at < tailBytes; at += BLOCK) compress(STATE, TAIL, at);
  for (let i = 0; i < outBytes; i++) out[outAt + i] = STATE[i >>> 2]! >>> (24 - 8 * (i & 3));
}

/** SHA-256 of `message`. */
export function sha256(message: Uint8Array): Uint8Array {
  const out = new Uint8Array(DIGEST_BYTES);
  finish(IV, 0, message, message.length, out, 0, DIGEST_BYTES);
  return out;
}

/** HMAC-SHA-256 under one key; `mac` may be called any number of times. */
export class HmacSha256 {
  /** States after the key's inner and outer padded blocks. */
  readonly #inner: Uint32Array;
  readonly #outer: Uint32Array;

  constructor(key: Uint8Array) {
    const k = new Uint8Array(BLOCK);
    k.set(key.length > BLOCK ? sha256(key) : key);
    const pad = new Uint8Array(BLOCK);
    this.#inner = IV.slice();
    for (let i = 0; i < BLOCK; i++) pad[i] = k[i]! ^ 0x36;
    compress(this.#inner, pad, 0);
    this.#outer = IV.slice();
    for (let i = 0; i < BLOCK; i++) pad[i] = k[i]! ^ 0x5c;
    compress(this.#outer, pad, 0);
  }

  mac(message: Uint8Array): Uint8Array {
    const out = new Uint8Array(DIGEST_BYTES);
    this.macInto(message, message.length, out, 0, DIGEST_BYTES);
    return out;
  }

  /**
   * Writes the first `outBytes` bytes of the MAC of `message[0..length)` to `out` at `outAt`,
   * allocating nothing; `out` may be the message's own buffer.
   */
  macInto(message: Uint8Array, length: number, out: Uint8Array, outAt: number, outBytes: number): void {
    finish(this.#inner, BLOCK, message, length, INNER, 0, DIGEST_BYTES);
    finish(this.#outer, BLOCK, INNER, DIGEST_BYTES, out, outAt, outBytes);
  }
}
