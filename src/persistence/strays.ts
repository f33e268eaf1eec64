/**
 * What a load leaves in the session's folder that nothing needs any more. The manifest a load
 * takes (latest.json) names history only up to its checkpoint; blocks stored past it (a turn that
 * was interrupted, failed or still running when the deployment that wrote them went away) and
 * native records whose checkpoint manifest was never written are named by no manifest, so no
 * restore or load can ever read them. A restore knows its cut-off objects from its own SQLite; a
 * load has none, so it lists the folder.
 *
 * A checkpoint stored beside latest.json but not in its manifest (published just before a crash
 * that kept latest.json from being rewritten, published since by a deployment that still holds the
 * session, or cut off by a restore whose deployment then lost its disk) stays restorable: its
 * manifest is read and what it names is kept. So does a checkpoint latest.json lists whose own
 * manifest names other blocks than latest.json's history: releases before blocks ended at
 * checkpoints stored a block spanning past one, and after a restore to that checkpoint latest.json
 * names new blocks for the same bytes. Such a block starts before a listed checkpoint's offset, so
 * only then are the manifests of the listed checkpoints past its start read (a turn's blocks past
 * the checkpoint, the usual strays, cost no reads). A load holds its strays in `sync_strays`; the
 * uploader asks again once this session wrote latest.json itself, and deletes those found both
 * times (docs/design-notes.md "Persistence").
 */
import { log } from "../log.ts";
import type { Layout, StoredObject } from "./layout.ts";
import { parseManifest, type Manifest } from "./manifest.ts";
import type { ObjectStore } from "./store.ts";

/**
 * The blocks and native objects of the session's folder that neither `m` nor any other stored
 * manifest names. Best effort: a provider that refuses to list (credentials without the list
 * permission) or a stored manifest that cannot be read gives none, and the caller goes on.
 */
export async function strays(store: ObjectStore, layout: Layout, m: Manifest, session: string): Promise<string[]> {
  try {
    const listed = (await store.list(layout.folder())).map((key) => ({ key, what: layout.kindOf(key) }));
    const named = new Set(namedBy(m, layout));
    const nameAlso = async (checkpoint: string) => {
      const bytes = await store.get(layout.checkpoint(checkpoint));
      if (bytes) for (const key of namedBy(parseManifest(bytes), layout)) named.add(key);
    };
    const known = new Set(m.checkpoints.map((c) => c.id));
    for (const { what } of listed) {
      if (what?.kind === "checkpoint" && !known.has(what.checkpoint)) await nameAlso(what.checkpoint);
    }
    const unnamed = (what: StoredObject | undefined, key: string) => (what?.kind === "block" || what?.kind === "native") && !named.has(key);
    // A folder may hold more keys than a call takes arguments: no spread into Math.min.
    const earliest = listed.reduce((min, { key, what }) => (what?.kind === "block" && unnamed(what, key) ? Math.min(min, what.start) : min), Infinity);
    for (const c of m.checkpoints) if (c.offset > earliest) await nameAlso(c.id);
    return listed.filter(({ key, what }) => unnamed(what, key)).map(({ key }) => key);
  } catch (e) {
    log("warn", "objects a load found past its checkpoint stay in storage (the folder could not be listed, or a stored manifest read)", {
      session_id: session,
      error: e instanceof Error ? e.message : String(e),
    });
    return [];
  }
}

function namedBy(m: Manifest, layout: Layout): string[] {
  return [...m.history.map((b) => b.key), ...m.checkpoints.flatMap((c) => [c.native, layout.checkpoint(c.id)])];
}
