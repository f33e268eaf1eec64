/**
 * The `r2` provider through workerd's R2 binding (wrangler.toml binds PERSISTENCE): create-only
 * puts keep the first object, the pointer is overwritten, reads are byte-exact, deletes are
 * idempotent.
 */
import { describe, expect, it } from "vitest";
import { R2Store } from "../../src/persistence/r2-store.ts";
import { env } from "./helpers.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));

describe("persistence provider r2 (binding)", () => {
  it("creates immutable objects once (If-None-Match: *), overwrites the pointer, reads back, deletes", async () => {
    const store = new R2Store(env.PERSISTENCE!);
    const key = `p/${crypto.randomUUID()}/blocks/0-ä +=&.ndjson`;
    const block = "y".repeat(64 * 1024);
    await store.create(key, bytes(block), "application/x-ndjson");
    await store.create(key, bytes("other bytes"), "application/x-ndjson");
    expect(text(await store.get(key))).toBe(block);
    await store.put(`${key}.latest`, bytes("one"), "application/json");
    await store.put(`${key}.latest`, bytes("two"), "application/json");
    expect(text(await store.get(`${key}.latest`))).toBe("two");
    expect(await store.get(`${key}.missing`)).toBeNull();
    await store.delete(key);
    await store.delete(key);
    expect(await store.get(key)).toBeNull();
  });
});
