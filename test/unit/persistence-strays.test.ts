/**
 * What a load finds in the session's folder to delete (src/persistence/strays.ts), against the
 * filesystem provider's real file service: blocks and native objects no stored manifest names go;
 * what latest.json's manifest or another stored checkpoint's names, and keys the layout does not
 * give, stay. A listing that fails, or a stored manifest that cannot be read, deletes nothing.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { persistenceFsHandler } from "../../runner-host/cli/persistence-fs.ts";
import { FsStore } from "../../src/persistence/fs-store.ts";
import { Layout } from "../../src/persistence/layout.ts";
import { ManifestSchema, type Manifest } from "../../src/persistence/manifest.ts";
import { StoreError } from "../../src/persistence/store.ts";
import { strays } from "../../src/persistence/strays.ts";

const session = "0123456789abcdef0123456789abcdef";
const [c1, c2, c3] = ["1", "2", "3"].map((d) => d.repeat(32)) as [string, string, string];

afterEach(() => vi.restoreAllMocks());

/**
 * A folder as a deployment leaves it when it goes away after publishing c2 but before latest.json
 * named it: latest.json is c1's manifest, c2's manifest is stored beside it, a turn's blocks lie past
 * c2, a native object's manifest was never written (c3), plus keys the layout does not give and
 * another session's block.
 */
async function folder() {
  const dir = mkdtempSync(path.join(tmpdir(), "svc-strays-"));
  const store = new FsStore({ fetch: (u: string, init?: RequestInit) => persistenceFsHandler(dir)(new Request(u, init)) });
  const layout = await Layout.of("svc", "acme", session);
  const write = (key: string, text: string) => {
    mkdirSync(path.dirname(path.join(dir, key)), { recursive: true });
    writeFileSync(path.join(dir, key), text);
  };
  const block = (start: number, end: number, h: string) => layout.block(start, end, h.repeat(16));
  const manifest = (history: [number, number, string][], cps: string[]): Manifest =>
    ManifestSchema.parse({
      format: 1,
      session: { id: session, tenant: "acme", harness: "pi", config: { model: "a/b", tools: [] }, created_at: "x", updated_at: "x", descriptors: [] },
      cursor_key: "k",
      epoch: 1,
      epoch_cuts: [],
      credentials: [],
      checkpoint: { id: cps.at(-1), offset: history.at(-1)![1], time: "x" },
      history: history.map(([start, end, h]) => ({ key: block(start, end, h), start, end })),
      checkpoints: cps.map((id, i) => ({ id, offset: history[i]![1], time: "x", native: layout.native(id), records: 1 })),
    });
  const latest = manifest([[0, 10, "a"]], [c1]);
  write(layout.latest(), JSON.stringify(latest));
  write(layout.checkpoint(c1), JSON.stringify(latest));
  write(layout.checkpoint(c2), JSON.stringify(manifest([[0, 10, "a"], [10, 20, "b"]], [c1, c2])));
  for (const [start, end, h] of [[0, 10, "a"], [10, 20, "b"], [20, 30, "c"], [30, 40, "d"]] as const) write(block(start, end, h), "x");
  for (const id of [c1, c2, c3]) write(layout.native(id), "{}\n");
  write(`${layout.folder()}notes.txt`, "kept");
  write(`${layout.folder()}blocks/not-a-block.ndjson`, "kept");
  write((await Layout.of("svc", "acme", "f".repeat(32))).block(20, 30, "c".repeat(16)), "another session's");
  return { store, layout, latest, block, write };
}

describe("a load's strays", () => {
  it("are the blocks and native objects no stored manifest names; another stored checkpoint's objects, and keys the layout does not give, stay", async () => {
    const f = await folder();
    const found = await strays(f.store, f.layout, f.latest, session);
    expect(found.sort()).toEqual([f.block(20, 30, "c"), f.block(30, 40, "d"), f.layout.native(c3)].sort());
  });

  it("keep a block a listed checkpoint's own manifest names past its offset (earlier releases' blocks spanned checkpoints), and read no listed checkpoint's manifest for strays past the checkpoint", async () => {
    const f = await folder();
    const reads = vi.spyOn(f.store, "get");
    await strays(f.store, f.layout, f.latest, session);
    expect(reads.mock.calls.map(([key]) => key)).toEqual([f.layout.checkpoint(c2)]);

    // c1 as an earlier release uploaded it: one block from 0 past c1's offset (10); latest.json,
    // rewritten after a restore to c1, names a new block for bytes 0..10.
    const spanning = f.block(0, 25, "s");
    f.write(spanning, "x");
    f.write(f.layout.checkpoint(c1), JSON.stringify({ ...f.latest, history: [{ key: spanning, start: 0, end: 25 }] }));
    const unnamed = f.block(0, 10, "e");
    f.write(unnamed, "x");
    reads.mockClear();
    const found = await strays(f.store, f.layout, f.latest, session);
    expect(found.sort()).toEqual([unnamed, f.block(20, 30, "c"), f.block(30, 40, "d"), f.layout.native(c3)].sort());
    expect(reads.mock.calls.map(([key]) => key).sort()).toEqual([f.layout.checkpoint(c1), f.layout.checkpoint(c2)].sort());
  });

  it("are none when the provider refuses to list, or a stored manifest cannot be read: a warn line says so, and the caller goes on", async () => {
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(line));
    const f = await folder();
    vi.spyOn(f.store, "list").mockRejectedValueOnce(new StoreError("s3 list svc/: HTTP 403 AccessDenied"));
    expect(await strays(f.store, f.layout, f.latest, session)).toEqual([]);
    f.write(f.layout.checkpoint(c2), "{ not json");
    expect(await strays(f.store, f.layout, f.latest, session)).toEqual([]);
    const warned = lines.map((l) => JSON.parse(l) as Record<string, string>);
    expect(warned).toMatchObject([
      { level: "warn", session_id: session, error: "s3 list svc/: HTTP 403 AccessDenied" },
      { level: "warn", session_id: session, error: "the stored manifest is not JSON" },
    ]);
    expect(warned[0]!.msg).toMatch(/^objects a load found past its checkpoint stay in storage/);
  });
});
