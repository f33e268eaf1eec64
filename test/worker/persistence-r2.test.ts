/**
 * The `r2` provider through workerd's R2 binding (wrangler.toml binds PERSISTENCE), held to the
 * same store contract as every other provider (test/helpers/store-contract.ts): create-only puts
 * keep the first object, the pointer is overwritten, reads are byte-exact, deletes are idempotent.
 */
import { describe, it } from "vitest";
import { R2Store } from "../../src/persistence/r2-store.ts";
import { checkStoreContract } from "../helpers/store-contract.ts";
import { env } from "./helpers.ts";

describe("persistence provider r2 (binding)", () => {
  it("creates immutable objects once (If-None-Match: *), overwrites the pointer, reads back, deletes", async () => {
    await checkStoreContract(new R2Store(env.PERSISTENCE!));
  });
});
