/**
 * The `r2` provider through workerd's R2 binding (wrangler.toml binds PERSISTENCE), held to the
 * same store contract as every other provider (test/helpers/store-contract.ts): create-only puts
 * keep the first object, the pointer is overwritten, reads are byte-exact, deletes are idempotent,
 * and a folder lists across pages.
 */
import { describe, it } from "vitest";
import { R2Store } from "../../src/persistence/r2-store.ts";
import { checkStoreContract, checkStoreList } from "../helpers/store-contract.ts";
import { env } from "./helpers.ts";

describe("persistence provider r2 (binding)", () => {
  it("creates immutable objects once (If-None-Match: *), overwrites the pointer, reads back, deletes", async () => {
    await checkStoreContract(new R2Store(env.PERSISTENCE!));
  });
  it("lists every key under a session's folder, page after page (cursor), and nothing of a folder whose name starts alike", async () => {
    await checkStoreList(new R2Store(env.PERSISTENCE!, 2));
  });
});
