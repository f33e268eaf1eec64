/** Listing with the PostgreSQL mirror: one page from this deployment's index, one from the mirror. */
import type { Session } from "../shared/api-schema.ts";

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

/** Merges two ascending pages by id (the newer row of a session wins) and keeps `limit`. */
export function mergePages(a: MirrorRow[], b: MirrorRow[], limit: number): Session[] {
  const byId = new Map<string, MirrorRow>();
  for (const r of [...a, ...b]) {
    const seen = byId.get(r.id);
    if (!seen || newer(r, seen)) byId.set(r.id, r);
  }
  return [...byId.values()].sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0)).slice(0, limit).map((r) => r.body);
}
