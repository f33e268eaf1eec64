/**
 * The cursor MAC's own HMAC-SHA-256 (src/shared/hmac-sha256.ts) gives the standard bytes: checked
 * against `node:crypto` for every message length across the padding's edges and keys shorter
 * than, as long as and longer than a block. And base64url from the bytes (src/shared/base64.ts)
 * spells what Node's own encoder does.
 */
import { createHash, createHmac, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { HmacSha256, sha256 } from "../../src/shared/hmac-sha256.ts";
import { fromBase64Url, toBase64Url } from "../../src/shared/base64.ts";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

describe("HMAC-SHA-256 with the key's pads hashed once", () => {
  it("SHA-256 of every length from 0 to 300 bytes matches node:crypto (one, two and more blocks, the padding's edges 55/56/63/64)", () => {
    for (let n = 0; n <= 300; n++) {
      const m = randomBytes(n);
      expect(hex(sha256(m)), `length ${n}`).toBe(createHash("sha256").update(m).digest("hex"));
    }
  });

  it.each([0, 1, 16, 31, 32, 63, 64, 65, 100, 128, 200])("a %i-byte key MACs every message length from 0 to 200 bytes as node:crypto does", (keyLength) => {
    const key = randomBytes(keyLength);
    const hmac = new HmacSha256(key);
    for (let n = 0; n <= 200; n++) {
      const m = randomBytes(n);
      expect(hex(hmac.mac(m)), `message length ${n}`).toBe(createHmac("sha256", key).update(m).digest("hex"));
    }
  });

  it("gives the same MAC for the same message however many times it is used, and another for another message", () => {
    const hmac = new HmacSha256(Buffer.from("k".repeat(64)));
    const a = hex(hmac.mac(Buffer.from("position 1")));
    expect(hex(hmac.mac(Buffer.from("position 2")))).not.toBe(a);
    expect(hex(hmac.mac(Buffer.from("position 1")))).toBe(a);
  });

  it("writes a MAC's first bytes after its own message in one buffer (how a cursor is made), touching nothing else", () => {
    const hmac = new HmacSha256(Buffer.from("k".repeat(64)));
    for (const n of [0, 11, 55, 56, 64, 100]) {
      const buf = new Uint8Array(n + 20).fill(0xee);
      buf.set(randomBytes(n));
      const message = buf.slice(0, n);
      hmac.macInto(buf, n, buf, n, 16);
      expect(hex(buf.subarray(0, n))).toBe(hex(message));
      expect(hex(buf.subarray(n, n + 16))).toBe(hex(hmac.mac(message).subarray(0, 16)));
      expect(hex(buf.subarray(n + 16))).toBe("ee".repeat(4));
    }
  });

  it("matches the RFC 4231 test case 2 (key \"Jefe\")", () => {
    const mac = new HmacSha256(Buffer.from("Jefe")).mac(Buffer.from("what do ya want for nothing?"));
    expect(hex(mac)).toBe("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  });
});

describe("base64url from the bytes", () => {
  it("spells every length from 0 to 100 bytes as Node's base64url does, and decodes back", () => {
    for (let n = 0; n <= 100; n++) {
      const b = randomBytes(n);
      const s = toBase64Url(b);
      expect(s, `length ${n}`).toBe(b.toString("base64url"));
      expect(hex(fromBase64Url(s)!)).toBe(hex(b));
    }
    expect(toBase64Url(Uint8Array.of(0xfb, 0xff, 0xbf))).toBe("-_-_");
  });
});
