/** Pure pieces of persistence: object keys, the manifest contract, and merging index pages. */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Layout } from "../../src/persistence/layout.ts";
import { ManifestSchema } from "../../src/persistence/manifest.ts";
import { mergePages, type MirrorRow } from "../../src/persistence/merge-pages.ts";

const id = "0123456789abcdef0123456789abcdef";

describe("persistence layout", () => {
  it("puts a session's objects under prefix / tenant hash / session, with offsets that sort in history order", async () => {
    const tenantHash = createHash("sha256").update("acme/ä").digest("hex").slice(0, 32);
    const l = await Layout.of("svc", "acme/ä", id);
    const root = `svc/${tenantHash}/${id}/`;
    expect(l.block(0, 65_536, "ab".repeat(32))).toBe(`${root}blocks/0000000000000000-0000000000065536-${"ab".repeat(8)}.ndjson`);
    expect(l.native(id)).toBe(`${root}native/${id}.ndjson`);
    expect(l.checkpoint(id)).toBe(`${root}checkpoints/${id}.json`);
    expect(l.latest()).toBe(`${root}latest.json`);
    expect((await Layout.of("", "t", id)).latest()).toMatch(/^[0-9a-f]{32}\/0123/);
    expect((await Layout.of("a/b/", "t", id)).latest()).toMatch(/^a\/b\/[0-9a-f]{32}\//);
    const keys = [l.block(65_536, 70_000, "0"), l.block(0, 65_536, "f"), l.block(9, 10, "0")].sort();
    expect(keys.map((k) => Number(/blocks\/(\d+)-/.exec(k)![1]))).toEqual([0, 9, 65_536]);
  });

  it("the manifest schema is strict: an unknown field or a wrong format is refused", () => {
    const m = {
      format: 1,
      session: { id, tenant: "t", harness: "pi", config: { model: "a/b", tools: [] }, created_at: "x", updated_at: "x", descriptors: [] },
      cursor_key: "k",
      epoch: 1,
      epoch_cuts: [],
      credentials: [],
      checkpoint: null,
      history: [],
      checkpoints: [],
    };
    expect(ManifestSchema.safeParse(m).success).toBe(true);
    expect(ManifestSchema.safeParse({ ...m, extra: 1 }).success).toBe(false);
    expect(ManifestSchema.safeParse({ ...m, format: 2 }).success).toBe(false);
    // Tool bindings (runtime tools, credential overrides) travel with the session.
    const bindings = [{ alias: "ops", tools: ["ops__run"], executor: id, runtime: [{ name: "run", description: "d", input_schema: { type: "object" } }], parameters: { env: "prod" } }];
    expect(ManifestSchema.safeParse({ ...m, session: { ...m.session, bindings } }).success).toBe(true);
    expect(ManifestSchema.safeParse({ ...m, session: { ...m.session, bindings: [{ alias: "x" }] } }).success).toBe(false);
  });
});

describe("listing with the PostgreSQL mirror", () => {
  const T0 = "2026-11-26T10:00:00.000Z";
  const row = (i: string, version: number, updated_at = T0): MirrorRow => ({ id: i, version, body: { id: i, version, updated_at } as never });
  it("merges the local and the mirrored page by id, the higher version winning at the same updated_at, and keeps the limit", () => {
    const local = [row("a", 3), row("c", 1)];
    const shared = [row("a", 2), row("b", 5), row("c", 4), row("d", 1)];
    expect(mergePages(local, shared, 3)).toEqual([row("a", 3).body, row("b", 5).body, row("c", 4).body]);
    expect(mergePages([], [], 10)).toEqual([]);
  });

  it("a later updated_at wins over a higher version: a session loaded on another deployment counts its versions anew", () => {
    const moved = row("a", 2, "2026-11-26T10:05:00.000Z"); // closed on the deployment that loaded it
    expect(mergePages([moved], [row("a", 10)], 10)).toEqual([moved.body]);
    expect(mergePages([row("a", 10)], [moved], 10)).toEqual([moved.body]);
  });
});
