/** Listing with the PostgreSQL mirror: one page from this deployment's index, one from the mirror. */
import type { Session } from "../shared/api-schema.ts";
import { byteLength } from "../shared/ids.ts";
import { cutPage } from "../tenant/list-page.ts";

export type MirrorRow = { id: string; version: number; body: Session };

/**
 * Which of two rows of one session is newer: the later `updated_at`, then the higher version. A
 * version counts changes on one deployment only (a session loaded elsewhere starts its own count),
 * so across deployments the time decides.
 */
export function newer(x: MirrorRow, y: MirrorRow): boolean {
  if (x.body.updated_at !== y.body.updated_at) return x.body.updated_at > y.body.updated_at;
  return x.version > y.version;
}

/**
 * Merges two ascending pages by id (the newer row of a session wins) and keeps `limit`, within the
 * page's size (src/tenant/list-page.ts). `local.cut`: this deployment's page stopped for its size,
 * so past its last id the merge is not known whole and stops there. `cut`: more follow.
 */
export function mergePages(local: { rows: MirrorRow[]; cut: boolean }, shared: MirrorRow[], limit: number): { sessions: Session[]; cut: boolean } {
  const byId = new Map<string, MirrorRow>();
  for (const r of [...local.rows, ...shared]) {
    const seen = byId.get(r.id);
    if (!seen || newer(r, seen)) byId.set(r.id, r);
  }
  let rows = [...byId.values()].sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
  const end = local.cut ? local.rows.at(-1)!.id : undefined;
  if (end !== undefined) rows = rows.filter((r) => r.id <= end);
  const page = cutPage(rows, (r) => byteLength(JSON.stringify(r.body)), limit);
  return { sessions: page.rows.map((r) => r.body), cut: page.cut || end !== undefined };
}
