/** Ids (docs/api.md "Events"): 32 lowercase hex characters from a CSPRNG, drawn from a pool of random bytes. */
import { describe, expect, it } from "vitest";
import { ID_PATTERN, newId, toHex } from "../../src/shared/ids.ts";

describe("ids", () => {
  it("issues distinct 32-hex ids across several refills of the random pool", () => {
    const ids = Array.from({ length: 1000 }, newId); // 16 bytes each: ~4 pools of 4096 bytes
    expect(ids.every((id) => ID_PATTERN.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    // Every hex digit shows up in every position over 1000 random ids (a stuck byte would not).
    for (let i = 0; i < 32; i++) expect(new Set(ids.map((id) => id[i])).size).toBe(16);
  });

  it("writes bytes as two lowercase hex digits each", () => {
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    expect(toHex(all)).toBe([...all].map((b) => b.toString(16).padStart(2, "0")).join(""));
    expect(toHex(new Uint8Array())).toBe("");
  });
});
