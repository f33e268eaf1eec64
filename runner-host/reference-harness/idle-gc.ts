/**
 * A young-generation collection when the process goes idle (no turn running in any session).
 *
 * The reference harness runs with a 1 MiB semi-space (`--max-semi-space-size=1`, what keeps a
 * process with 16 sessions under 80 MiB), and a turn allocates about that much, so a scavenge
 * (~0.5 ms) fell inside nearly every turn, often between the `run` and the first delta. Collected
 * while nothing runs, the young generation starts each turn empty and the scavenge lands in idle
 * time instead (bench/RESULTS.md "First output, round 5"). Needs `gc`, which Node exposes only
 * under `--expose-gc`; without it this does nothing.
 */
type MinorGc = (options: { type: "minor" }) => void;

/** Returns `turnEnded`: call it after a turn's end; the collection runs once output is flushed. */
export function idleCollector(busy: () => boolean): () => void {
  const gc = (globalThis as { gc?: MinorGc }).gc;
  if (typeof gc !== "function") return () => {};
  let scheduled = false;
  return () => {
    if (scheduled) return;
    scheduled = true;
    // After the output batch's own setImmediate (queued first), so the turn's end is written first.
    setImmediate(() => {
      scheduled = false;
      if (!busy()) gc({ type: "minor" });
    });
  };
}
