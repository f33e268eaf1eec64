/**
 * The contract every persistence provider's ObjectStore keeps (src/persistence/store.ts), checked
 * the same way against each real peer: in Node (S3 API, GCS, filesystem) and in workerd (the R2
 * binding). No Node-only imports: the workers pool runs it too.
 */
import { expect } from "vitest";
import type { ObjectStore } from "../../src/persistence/store.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));

/**
 * Creates an immutable object once (a second create, as an upload resumed after a crash makes,
 * succeeds and changes nothing), overwrites the pointer, reads back byte-exact (a key with
 * characters that need escaping, 64 KiB), answers null for a missing key, deletes idempotently.
 * `peerKeepsFirst: false` for a peer that ignores the create precondition (s3rver): the second
 * create then carries the same bytes, and the precondition is checked on the request elsewhere.
 */
export async function checkStoreContract(store: ObjectStore, peerKeepsFirst = true): Promise<void> {
  const key = `p/${crypto.randomUUID()}/blocks/0000-ä +=&~*.ndjson`;
  const big = "x".repeat(64 * 1024);
  await store.create(key, bytes(big), "application/x-ndjson");
  await store.create(key, bytes(peerKeepsFirst ? "other bytes" : big), "application/x-ndjson");
  expect(text(await store.get(key))).toBe(big);
  await store.put(`${key}.latest`, bytes("one"), "application/json");
  await store.put(`${key}.latest`, bytes("two"), "application/json");
  expect(text(await store.get(`${key}.latest`))).toBe("two");
  expect(await store.get(`${key}.missing`)).toBeNull();
  await store.delete(key);
  await store.delete(key);
  expect(await store.get(key)).toBeNull();
}
