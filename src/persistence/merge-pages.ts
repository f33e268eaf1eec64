/** Listing with the PostgreSQL mirror: one page from this deployment's index, one from the mirror. */
import type { Session } from "../shared/api-schema.ts";

export type MirrorRow = { id: string; version: number; body: Session };

/** Merges two ascending pages by id (the higher version of a session wins) and keeps `limit`. */
export function mergePages(a: MirrorRow[], b: MirrorRow[], limit: number): Session[] {
  const byId = new Map<string, MirrorRow>();
  for (const r of [...a, ...b]) {
    const seen = byId.get(r.id);
    if (!seen || seen.version < r.version) byId.set(r.id, r);
  }
  return [...byId.values()].sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0)).slice(0, limit).map((r) => r.body);
}
