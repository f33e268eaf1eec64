/**
 * The cursor codec (docs/api.md "Cursors": opaque base64url carrying the log epoch
 * and position and a MAC keyed per session).
 */
import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { decodeCursor, encodeCursor, MAX_CURSOR_BYTES } from "../../src/session/cursor.ts";

const KEY = "a".repeat(32) + "b".repeat(32);
const OTHER_KEY = "c".repeat(64);
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

describe("cursor codec", () => {
  it("round-trips a position", () => {
    const c = encodeCursor(KEY, { epoch: 1, seq: 42 });
    expect(decodeCursor(KEY, c)).toEqual({ epoch: 1, seq: 42 });
  });

  it.each([
    { epoch: 0, seq: 0 },
    { epoch: 1, seq: 1 },
    { epoch: 2 ** 32 - 1, seq: 0 },
    { epoch: 7, seq: 2 ** 32 - 1 },
    { epoch: 7, seq: 2 ** 32 },
    { epoch: 7, seq: 2 ** 40 },
    { epoch: 7, seq: 2 ** 40 + 12345 },
    { epoch: 2 ** 32 - 1, seq: 2 ** 48 - 1 },
  ])("round-trips the edge position epoch $epoch seq $seq", (pos) => {
    expect(decodeCursor(KEY, encodeCursor(KEY, pos))).toEqual(pos);
  });

  it("is a 36-character base64url string without padding, the same for the same key and position", () => {
    const c = encodeCursor(KEY, { epoch: 3, seq: 99 });
    expect(c).toMatch(/^[A-Za-z0-9_-]{36}$/);
    expect(encodeCursor(KEY, { epoch: 3, seq: 99 })).toBe(c);
    expect(encodeCursor(KEY, { epoch: 3, seq: 100 })).not.toBe(c);
    expect(encodeCursor(KEY, { epoch: 4, seq: 99 })).not.toBe(c);
  });

  it("fails when any single character is changed", () => {
    const c = encodeCursor(KEY, { epoch: 1, seq: 2 ** 40 });
    for (let i = 0; i < c.length; i++) {
      for (const ch of [ALPHABET[(ALPHABET.indexOf(c[i]!) + 1) % 64]!, ALPHABET[(ALPHABET.indexOf(c[i]!) + 32) % 64]!]) {
        const tampered = c.slice(0, i) + ch + c.slice(i + 1);
        expect(decodeCursor(KEY, tampered), `position ${i} → ${ch}`).toBeUndefined();
      }
    }
  });

  it("fails when truncated or extended", () => {
    const c = encodeCursor(KEY, { epoch: 1, seq: 5 });
    for (let n = 1; n < c.length; n++) expect(decodeCursor(KEY, c.slice(0, n))).toBeUndefined();
    for (const tail of ["A", "AA", "AAA", "AAAA"]) expect(decodeCursor(KEY, c + tail)).toBeUndefined();
  });

  it("carries HMAC-SHA256 of its payload under the session's key, so cursors handed out before stay valid", () => {
    const c = encodeCursor(KEY, { epoch: 1, seq: 5 });
    const all = Buffer.from(c, "base64url");
    expect(all.subarray(11).toString("hex")).toBe(createHmac("sha256", KEY).update(all.subarray(0, 11)).digest().subarray(0, 16).toString("hex"));
  });

  it("round-trips under more session keys than one isolate keeps set up, the first key again after them", () => {
    const keys = Array.from({ length: 1100 }, (_, i) => `key-${i}-${"x".repeat(i % 80)}`);
    for (const [i, k] of keys.entries()) expect(decodeCursor(k, encodeCursor(k, { epoch: 1, seq: i }))).toEqual({ epoch: 1, seq: i });
    expect(decodeCursor(keys[0]!, encodeCursor(keys[1]!, { epoch: 1, seq: 0 }))).toBeUndefined();
    expect(decodeCursor(keys[0]!, encodeCursor(keys[0]!, { epoch: 2, seq: 7 }))).toEqual({ epoch: 2, seq: 7 });
  });

  it("fails under another session's key (a cursor from another session)", () => {
    const c = encodeCursor(KEY, { epoch: 1, seq: 5 });
    expect(decodeCursor(OTHER_KEY, c)).toBeUndefined();
    expect(decodeCursor(OTHER_KEY, encodeCursor(OTHER_KEY, { epoch: 1, seq: 5 }))).toEqual({ epoch: 1, seq: 5 });
  });

  it("fails for an event id (32 hex characters) and for the empty string", () => {
    expect(decodeCursor(KEY, "0123456789abcdef0123456789abcdef")).toBeUndefined();
    expect(decodeCursor(KEY, "")).toBeUndefined();
  });

  it(`fails for anything over ${MAX_CURSOR_BYTES} bytes`, () => {
    const c = encodeCursor(KEY, { epoch: 1, seq: 5 });
    expect(MAX_CURSOR_BYTES).toBe(512);
    expect(decodeCursor(KEY, c + "A".repeat(MAX_CURSOR_BYTES + 1 - c.length))).toBeUndefined();
    expect(decodeCursor(KEY, "A".repeat(100_000))).toBeUndefined();
  });

  it("fails for text that is not base64url: standard base64, padding, whitespace, other characters", () => {
    // Find a cursor whose encoding contains - or _ so that its standard-base64 spelling differs.
    let c = "";
    for (let seq = 0; !/[-_]/.test(c); seq++) c = encodeCursor(KEY, { epoch: 1, seq });
    const std = c.replace(/-/g, "+").replace(/_/g, "/");
    expect(decodeCursor(KEY, std)).toBeUndefined();
    for (const bad of [`${c}=`, `${c}==`, ` ${c}`, `${c}\n`, `${c.slice(0, 10)}.${c.slice(11)}`, `${c.slice(0, 10)}é${c.slice(11)}`]) {
      expect(decodeCursor(KEY, bad), JSON.stringify(bad)).toBeUndefined();
    }
  });

  it("fails for a correctly MACed payload of another version", () => {
    const payload = new Uint8Array(11);
    payload[0] = 2;
    payload[4] = 1;
    payload[10] = 5;
    const mac = createHmac("sha256", KEY).update(payload).digest().subarray(0, 16);
    const all = Buffer.concat([payload, mac]);
    const c = all.toString("base64url");
    expect(c).toMatch(/^[A-Za-z0-9_-]{36}$/);
    expect(decodeCursor(KEY, c)).toBeUndefined();
    // The same bytes with version 1 are a valid cursor: only the version made the difference.
    payload[0] = 1;
    const mac1 = createHmac("sha256", KEY).update(payload).digest().subarray(0, 16);
    expect(decodeCursor(KEY, Buffer.concat([payload, mac1]).toString("base64url"))).toEqual({ epoch: 1, seq: 5 });
  });
});
