/**
 * A young-generation collection when the reference harness goes idle (no turn running in any of
 * its sessions).
 *
 * The harness runs with a 1 MiB semi-space (`--max-semi-space-size=1`, what keeps a process with
 * 16 sessions under 80 MiB), and a turn allocates about that much, so a scavenge (~0.5 ms) fell
 * inside nearly every turn, often between its `run` and its first delta. Collected at a turn's end
 * when nothing else runs, it lands between turns instead (bench/RESULTS.md "First output, round
 * 5"); collecting only from half full on let a third of the turns fill it again mid-turn. Needs
 * `gc`, which Node exposes only under `--expose-gc`; without it this does nothing.
 *
 * Not done in the runner-host: its young generation is V8's default (tens of MiB, a scavenge of
 * ~3 ms every few dozen turns), and a collection at a turn's end delayed the next turn's `run`,
 * which the runner-host is the first to handle (measured: p99 worse, p50 unchanged).
 */
type MinorGc = (options: { type: "minor" }) => void;

/** Returns `turnEnded`: call it after a turn's end; the collection runs once output is flushed. */
export function idleCollector(busy: () => boolean, gc = exposedGc()): () => void {
  if (!gc) return () => {};
  let scheduled = false;
  return () => {
    if (scheduled) return;
    scheduled = true;
    // After what the turn's end queued with setImmediate (the output batch), so that is written first.
    setImmediate(() => {
      scheduled = false;
      if (!busy()) gc({ type: "minor" });
    });
  };
}

function exposedGc(): MinorGc | undefined {
  const gc = (globalThis as { gc?: unknown }).gc;
  return typeof gc === "function" ? (gc as MinorGc) : undefined;
}
