/**
 * How big one page of `GET /sessions` may get (docs/api.md "Sessions"). A session's JSON can be
 * large (64 KiB of instructions, its bound tools' descriptors), and the tenant index hands its page
 * to the Worker in one call, which the runtime limits to 32 MiB: 1,000 such sessions failed the
 * list with a `500`. So a page also stops before it passes PAGE_BYTES of session JSON, as an event
 * page does, and then says where the next one starts. Pure: the index and the Worker's merge
 * with the PostgreSQL mirror both cut with it.
 */

/** Session JSON per list page, bytes, at most (a page holds at least one session): an event page's bound. */
export const PAGE_BYTES = 8 * 1024 * 1024;

/**
 * The first rows of `rows` (ascending) up to `limit`, stopping before the one that would take the
 * page past PAGE_BYTES (the first row always fits). `cut`: it stopped for size, and more follow.
 */
export function cutPage<T>(rows: Iterable<T>, bytes: (row: T) => number, limit: number): { rows: T[]; cut: boolean } {
  const out: T[] = [];
  let total = 0;
  for (const row of rows) {
    if (out.length >= limit) break;
    const n = bytes(row);
    if (out.length > 0 && total + n > PAGE_BYTES) return { rows: out, cut: true };
    total += n;
    out.push(row);
  }
  return { rows: out, cut: false };
}
