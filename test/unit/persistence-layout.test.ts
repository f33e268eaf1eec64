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
    const local = { rows: [row("a", 3), row("c", 1)], cut: false };
    const shared = [row("a", 2), row("b", 5), row("c", 4), row("d", 1)];
    expect(mergePages(local, shared, 3)).toEqual({ sessions: [row("a", 3).body, row("b", 5).body, row("c", 4).body], cut: false });
    expect(mergePages({ rows: [], cut: false }, [], 10)).toEqual({ sessions: [], cut: false });
  });

  it("stops where the local page stopped for its size (more follow), and within 8 MiB itself", () => {
    // The local page held a and c of more: b, c and d of the mirror's are merged only up to c.
    const shared = [row("b", 5), row("c", 4), row("d", 1)];
    expect(mergePages({ rows: [row("a", 3), row("c", 1)], cut: true }, shared, 10)).toEqual({ sessions: [row("a", 3).body, row("b", 5).body, row("c", 4).body], cut: true });
    // Sessions of 3 MiB each: two fit in 8 MiB, the third starts the next page.
    const big = (i: string): MirrorRow => ({ id: i, version: 1, body: { id: i, updated_at: T0, pad: "x".repeat(3 * 1024 * 1024) } as never });
    const page = mergePages({ rows: [big("a"), big("b")], cut: false }, [big("c")], 10);
    expect(page.sessions.map((s) => s.id)).toEqual(["a", "b"]);
    expect(page.cut).toBe(true);
    // One session larger than a page is a page of its own.
    expect(mergePages({ rows: [], cut: false }, [{ ...big("z"), body: { id: "z", updated_at: T0, pad: "x".repeat(9 * 1024 * 1024) } as never }], 10).sessions).toHaveLength(1);
  });

  it("a later updated_at wins over a higher version: a session loaded on another deployment counts its versions anew", () => {
    const moved = row("a", 2, "2026-11-26T10:05:00.000Z"); // closed on the deployment that loaded it
    expect(mergePages({ rows: [moved], cut: false }, [row("a", 10)], 10).sessions).toEqual([moved.body]);
    expect(mergePages({ rows: [row("a", 10)], cut: false }, [moved], 10).sessions).toEqual([moved.body]);
  });
});
