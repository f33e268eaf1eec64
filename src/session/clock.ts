/**
 * The session's clock as events and the session row carry it: ISO 8601 timestamps.
 *
 * The last timestamp made is kept, by its millisecond: a frame of deltas stamps every event in the
 * same millisecond (workerd's clock stands still while a handler runs), and `toISOString` per event
 * was ~1% of workerd's CPU in a turn.
 *
 * Lifecycle: module state, one copy per isolate (shared by the objects it runs); nothing is stored.
 */
let lastMs = NaN;
let lastIso = "";

export function now(): string {
  const ms = Date.now();
  if (ms !== lastMs) [lastMs, lastIso] = [ms, new Date(ms).toISOString()];
  return lastIso;
}
