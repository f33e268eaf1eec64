/**
 * Collections when the reference harness goes idle (no turn running in any of its sessions).
 *
 * 1. A young-generation collection at once when less than `YOUNG_ROOM_SHARE` of a semi-space is
 *    left, so the scavenge a turn calls for lands between turns instead of inside the next one,
 *    often between its `run` and its first delta (bench/RESULTS.md "First output, round 5"). With
 *    more room left the next short turn fits in it, and a collection now would be a scavenge paid
 *    at every turn's end for nothing (with what it promoted, ~0.5 ms of CPU per serial turn), at
 *    the moment the turn's last output is on its way to the client (bench/RESULTS.md "Eighteenth
 *    session").
 * 2. A trim once the process stays quiet. V8 grows the young generation while the process is
 *    busy (the provider libraries allocate ~9 KiB per streamed delta) and never gives that memory
 *    back by itself. A trim is V8's memory-reducing "last resort" collection (two or more full
 *    collections) and one ordinary full collection: the young generation goes back to its start
 *    size and the freed pages to the system, so an idle process is as small as one that never
 *    grew. It costs ~90–160 ms of CPU (by the heap's size), so it runs `TRIM_QUIET_MS` after the
 *    last turn ended only when the process has done at least `TRIM_WORK_FACTOR` times that much
 *    work since its last trim (after a burst or a long reply), and otherwise after `TRIM_IDLE_MS`
 *    of quiet: trims cost at most 1/16 of the work they follow, plus one per long quiet stretch.
 *    Capping the young generation instead (the harness ran with a 1 MiB one) made a long reply
 *    ~40% slower in CPU, and still left a process that had been busy ~30 MiB larger for good
 *    (bench/RESULTS.md "Twelfth session").
 *
 * Lifecycle: every turn end with nothing running schedules (1) for the next loop turn, which
 * restarts the quiet timer of (2); a timer that fires while a turn runs does nothing, and the next
 * idle turn end starts it again. The warm-up's end counts as a turn end. Both need `gc`, which Node
 * exposes only under `--expose-gc`; without it this does nothing.
 *
 * Not done in the runner-host: its young generation is V8's default (tens of MiB, a scavenge of
 * ~3 ms every few dozen turns), and a collection at a turn's end delayed the next turn's `run`,
 * which the runner-host is the first to handle (measured: p99 worse, p50 unchanged).
 */
import { getHeapSpaceStatistics } from "node:v8";

/** Quiet time before a trim the work since the last one pays for, ms: longer than the gaps
 * between turns of a busy stretch, so a stretch is trimmed once, at its end. */
export const TRIM_QUIET_MS = 1_000;
/** Quiet time after which a grown process is trimmed whatever it did before, ms. */
export const TRIM_IDLE_MS = 60_000;
/** CPU since the last trim, in multiples of that trim's own CPU, that a quick trim needs. */
export const TRIM_WORK_FACTOR = 16;
/** Share of one semi-space (half the young generation) that must still be free at an idle turn
 * end to skip its collection: a short turn allocates ~0.7–1 MiB (a 20-delta reply on a 250-turn
 * history) and a grown semi-space is 8–16 MiB, so half of one holds several turns; a turn that
 * allocates more scavenges mid-turn whatever was done before it. */
export const YOUNG_ROOM_SHARE = 0.5;

type Collect = (options: { type: "minor" | "major" } | { type: "major"; flavor: "last-resort" }) => void;

/** The young generation in bytes: its size (two semi-spaces) and the room left in the current one. */
export type YoungSpace = { size: number; room: number };

/** Seams for tests: the collector, the young generation, the process's CPU in ms, and the two
 * quiet times. */
export type IdleSeams = {
  gc?: Collect;
  young?: () => YoungSpace;
  cpuMs?: () => number;
  quietMs?: number;
  idleMs?: number;
};

/** Returns `turnEnded`: call it after a turn's end; the collections run once output is flushed. */
export function idleCollector(busy: () => boolean, seams: IdleSeams = {}): () => void {
  const gc = "gc" in seams ? seams.gc : exposedGc();
  if (!gc) return () => {};
  const young = seams.young ?? newSpace;
  const cpuMs = seams.cpuMs ?? processCpuMs;
  const quietMs = seams.quietMs ?? TRIM_QUIET_MS;
  const idleMs = seams.idleMs ?? TRIM_IDLE_MS;
  const startBytes = young().size;
  let trimCostMs = 0;
  let cpuAtTrim = cpuMs();
  let quiet: NodeJS.Timeout | undefined;
  const trim = () => {
    if (busy() || young().size <= startBytes) return;
    const before = cpuMs();
    gc({ type: "major", flavor: "last-resort" });
    // That collection leaves the old generation's limit tight, as for a process meant to shrink,
    // so the next long reply ran into full collections one after another (~1.6× its CPU). One
    // ordinary full collection sets the limit the usual way; it commits no memory.
    gc({ type: "major" });
    cpuAtTrim = cpuMs();
    trimCostMs = cpuAtTrim - before;
  };
  let scheduled = false;
  return () => {
    if (scheduled) return;
    scheduled = true;
    // After what the turn's end queued with setImmediate (the output batch), so that is written first.
    setImmediate(() => {
      scheduled = false;
      if (busy()) return;
      // Allocation fills one of the two semi-spaces at a time. One read of the heap's spaces.
      const { size, room } = young();
      if (room < (size / 2) * YOUNG_ROOM_SHARE) gc({ type: "minor" });
      const paidFor = cpuMs() - cpuAtTrim >= TRIM_WORK_FACTOR * trimCostMs;
      clearTimeout(quiet);
      quiet = setTimeout(trim, paidFor ? quietMs : idleMs);
      quiet.unref(); // a harness whose input ended exits without waiting for a trim
    });
  };
}

function newSpace(): YoungSpace {
  const s = getHeapSpaceStatistics().find((x) => x.space_name === "new_space");
  return { size: s?.space_size ?? 0, room: s?.space_available_size ?? 0 };
}

function processCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

function exposedGc(): Collect | undefined {
  const gc = (globalThis as { gc?: unknown }).gc;
  return typeof gc === "function" ? (gc as Collect) : undefined;
}
