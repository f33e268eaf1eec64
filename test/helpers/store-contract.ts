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

/**
 * Lists every key under a prefix across pages (the store is made with a page of 2 keys, so five
 * keys take three pages, and four keys exactly two), keys that need escaping included, and none of a folder whose name only
 * starts like it; a folder that holds nothing lists nothing. The keys of a session's folder are
 * what a load deletes from, so a missed page would leave objects and a wider match would delete
 * another session's. `xmlEscapedTwice`: a peer that escapes `&`, `<` and `>` twice in its list
 * answers (s3rver; S3 escapes once, which test/unit/persistence-stores.test.ts checks apart) is
 * given a key without them.
 */
export async function checkStoreList(store: ObjectStore, xmlEscapedTwice = false): Promise<void> {
  const base = `p/${crypto.randomUUID()} +x`;
  const odd = xmlEscapedTwice ? "blocks/0000-ä +=~*.ndjson" : "blocks/0000-ä +=&~*<>.ndjson";
  const keys = ["a.json", odd, "blocks/0001.ndjson", "native/x.ndjson", "z/deep/er.json"].map((k) => `${base}/s/${k}`);
  for (const k of keys) await store.create(k, bytes(k), "application/json");
  // The sibling holds exactly two pages: the last page is full, and nothing follows it.
  const sibling = ["0000", "0001", "0002", "0003"].map((n) => `${base}/s2/blocks/${n}.ndjson`);
  for (const k of sibling) await store.create(k, bytes("sibling"), "application/json");
  expect((await store.list(`${base}/s/`)).sort()).toEqual([...keys].sort());
  expect((await store.list(`${base}/s2/`)).sort()).toEqual(sibling);
  expect(await store.list(`${base}/none/`)).toEqual([]);
  for (const k of [...keys, ...sibling]) await store.delete(k);
  expect(await store.list(`${base}/`)).toEqual([]);
}
