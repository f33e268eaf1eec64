/**
 * The short chaos run in `npm test`: every fault of `npm run chaos`, a few runs each, on one live
 * service + runner-host + reference harness + scripted provider. The full proof (≥ 20 runs per
 * fault) is `npm run chaos`. The seed is printed; `SVC_CHAOS_SEED=<n>` replays its choices.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAOS_LIMITS, formatReport, problemLines, runFault } from "../../chaos/chaos.ts";
import { FAULTS, OVERSIZE } from "../../chaos/faults.ts";
import { startTopology, type Topology } from "../../chaos/topology.ts";

const RUNS = 2;
const SESSIONS = 2;
/**
 * No run of a fault starts after this, ms (a run takes ~3 s on an idle machine, a stack restart
 * ~2 s more): within the e2e test timeout, with room for the run in progress to end.
 */
const START_RUNS_WITHIN_MS = 30_000;
const seed = Number(process.env.SVC_CHAOS_SEED ?? Math.floor(Math.random() * 2 ** 31));

let t: Topology;
beforeAll(async () => {
  console.info(`chaos seed ${seed} (replay: SVC_CHAOS_SEED=${seed})`);
  t = await startTopology({ limits: CHAOS_LIMITS });
});
afterAll(async () => {
  await t?.stop();
});

async function expectNoViolation(fault: string): Promise<void> {
  const r = await runFault(t, fault, { seed, runs: RUNS, sessions: SESSIONS, deadline: Date.now() + START_RUNS_WITHIN_MS });
  console.info(formatReport(r));
  const v = r.verdict;
  expect({
    runs: r.runs,
    lost: v.lost,
    doubled: v.doubled,
    misplaced: v.misplaced,
    badEnds: v.badEnds,
    harmed: v.harmed,
    serverErrors: r.serverErrors.length,
    errors: r.errors.length,
    problems: problemLines(r),
  }).toEqual({ runs: RUNS, lost: 0, doubled: 0, misplaced: 0, badEnds: 0, harmed: 0, serverErrors: 0, errors: 0, problems: [] });
}

describe("chaos: with turns in flight, no retained event is lost or doubled and every turn ends in a documented end state", () => {
  for (const f of FAULTS) it(`${f.name}: ${f.what}`, () => expectNoViolation(f.name));

  it(
    "oversize native state: one tenant's reopen over the harness line limit does not fail another tenant's turn",
    () => expectNoViolation(OVERSIZE),
  );
});
