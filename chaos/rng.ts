/**
 * A seeded pseudo-random source (mulberry32): a chaos run prints its seed, and the same seed
 * replays the same choices (which fault timing, which process, which turn shape). Timing of the
 * system under test still varies; the choices made by the chaos driver do not.
 */
export type Rng = {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number;
  pick<T>(items: readonly T[]): T;
  /** A child source for one run, so runs stay replayable on their own (`seed` + run index). */
  fork(label: number): Rng;
};

export function rng(seed: number): Rng {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (items) => items[Math.floor(next() * items.length)]!,
    fork: (label) => rng((seed ^ Math.imul(label + 1, 0x9e3779b1)) >>> 0),
  };
}
