/**
 * A chaos run as a library: start the topology, run the chosen faults in order (each `runs`
 * times, seeded), stop everything. `main.ts` is the command; test/chaos uses the same entry.
 */
import { FAULTS, OVERSIZE } from "./faults.ts";
import { violations } from "./judge.ts";
import { runOversize } from "./oversize.ts";
import { rng } from "./rng.ts";
import { emptyReport, runStandard, type FaultReport } from "./run.ts";
import { startTopology, type Topology } from "./topology.ts";

export const FAULT_NAMES = [...FAULTS.map((f) => f.name), OVERSIZE];

/**
 * Subscriber budgets of the chaos service: small, so bursts and stalls really cut readers and
 * every cut is followed by a resume the judge checks (`subscriber_bytes` is at least 4096).
 */
export const CHAOS_LIMITS = { subscriber_events: 32, subscriber_bytes: 262_144 };

export type ChaosOptions = {
  seed: number;
  runs: number;
  faults: readonly string[];
  /** Sessions per run of a standard fault (1 to 3). */
  sessions: number;
  /** Wall-clock budget, ms: runs not started by then are missing (a violation). */
  budgetMs: number;
  verbose?: boolean;
  onReport?(r: FaultReport): void;
};

/** Runs one fault on a live topology. Exported for the test, which keeps one topology. */
export async function runFault(t: Topology, name: string, o: Omit<ChaosOptions, "faults" | "budgetMs"> & { deadline: number }): Promise<FaultReport> {
  const index = FAULT_NAMES.indexOf(name);
  if (index < 0) throw new Error(`unknown fault ${name}; known: ${FAULT_NAMES.join(", ")}`);
  const report = emptyReport(name);
  const t0 = performance.now();
  const root = rng(o.seed).fork(index);
  if (name === OVERSIZE) {
    await runOversize(t, root, o.runs, o.deadline, report);
  } else {
    const fault = FAULTS[index]!;
    for (let run = 0; run < o.runs && Date.now() < o.deadline; run++) {
      await runStandard(t, fault, root.fork(run), run, o.sessions, report);
    }
  }
  report.seconds = (performance.now() - t0) / 1000;
  return report;
}

export async function runChaos(o: ChaosOptions): Promise<FaultReport[]> {
  const deadline = Date.now() + o.budgetMs;
  const t = await startTopology({ limits: CHAOS_LIMITS, verbose: o.verbose });
  const reports: FaultReport[] = [];
  try {
    for (const name of o.faults) {
      const r = await runFault(t, name, { ...o, deadline });
      reports.push(r);
      o.onReport?.(r);
    }
  } finally {
    await t.stop();
  }
  return reports;
}

/** Violations of one fault's report: the judge's, 5xx answers, runs that broke off or never ran. */
export function reportViolations(r: FaultReport, runs: number): number {
  return violations(r.verdict) + r.serverErrors.length + r.errors.length + Math.max(0, runs - r.runs);
}

export function formatReport(r: FaultReport): string {
  const v = r.verdict;
  const outcomes = Object.entries(v.outcomes).sort().map(([k, n]) => `${k}=${n}`).join(" ");
  return [
    r.fault.padEnd(22),
    `runs ${r.runs}`,
    `turns ${r.turns}`,
    `lost ${v.lost}`,
    `doubled ${v.doubled}`,
    `misplaced ${v.misplaced}`,
    `bad_end ${v.badEnds}`,
    `harmed ${v.harmed}`,
    `5xx ${r.serverErrors.length}`,
    `errors ${r.errors.length}`,
    `cuts ${r.cuts}`,
    `${r.seconds.toFixed(0)}s`,
    `| ${outcomes}`,
  ].join("  ");
}

/** The first problems behind a report's violations, for the printout. */
export function problemLines(r: FaultReport, max = 12): string[] {
  return [...r.errors, ...r.serverErrors, ...r.verdict.problems].slice(0, max).map((p) => `    ${r.fault}: ${p}`);
}
