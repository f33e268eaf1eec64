/**
 * Runs one fault N times on a live topology and sums the verdicts. A run: fresh sessions (two of
 * tenant A, one of tenant B; fewer in a short run) each finish a first turn, start an in-flight
 * turn of the fault's shape, the fault lands (after a seeded jitter), every in-flight turn must
 * end, interrupted or failed sessions are resumed, and a recovery turn must end `idle`. Then each
 * session's stream is judged against its log.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Fault } from "./faults.ts";
import { addVerdicts, emptyVerdict, judgeSession, type Verdict } from "./judge.ts";
import type { Rng } from "./rng.ts";
import { SessionClient, type TurnEnd } from "./session-client.ts";
import type { Topology } from "./topology.ts";

/** How long one turn may take to end, ms: longer than the runner link's grace and give-up. */
export const TURN_MS = 60_000;
/** Upper bound of the seeded wait between "in flight" and the fault, ms. */
const JITTER_MS = 300;

export type FaultReport = {
  fault: string;
  runs: number;
  turns: number;
  verdict: Verdict;
  /** Responses ≥ 500 to any request of a client. */
  serverErrors: string[];
  /** Streams the server or a fault ended under a client (each followed by a resume). */
  cuts: number;
  /** Runs that could not finish (a step threw); each counts as a violation. */
  errors: string[];
  seconds: number;
};

export const emptyReport = (fault: string): FaultReport => ({
  fault, runs: 0, turns: 0, verdict: emptyVerdict(), serverErrors: [], cuts: 0, errors: [], seconds: 0,
});

/** Judges every session (its stream and log) into `report`; a session that cannot be read is an error. */
export async function judgeInto(report: FaultReport, sessions: readonly SessionClient[]): Promise<void> {
  for (const s of sessions) {
    try {
      const o = await s.observe();
      report.verdict = addVerdicts(report.verdict, judgeSession(o));
      report.turns += o.accepted.length;
    } catch (e) {
      report.errors.push(`judging ${s.id}: ${(e as Error).message}`);
    }
    report.serverErrors.push(...s.serverErrors, ...s.follower.serverErrors);
    report.cuts += s.follower.cuts;
  }
}

export async function runStandard(t: Topology, fault: Fault, r: Rng, run: number, sessionCount: number, report: FaultReport): Promise<void> {
  const api = { base: t.base, gate: t.gate };
  const tokens = [t.tokens.a, t.tokens.b, t.tokens.a].slice(0, sessionCount);
  const sessions: SessionClient[] = [];
  const key = (i: number, turn: number) => `chaos-${fault.name}-${run}-${i}-${turn}`;
  const all = <T>(f: (s: SessionClient, i: number) => Promise<T>) => Promise.all(sessions.map(f));
  try {
    for (const token of tokens) sessions.push(await SessionClient.create(api, token));
    const first = await all((s, i) => s.send(`hello from session ${i}`, key(i, 1), { idle: true }));
    await all((s, i) => s.ended(first[i]!, TURN_MS));

    const shapes = sessions.map((_, i) => fault.shape(r, i));
    const inFlight = await all((s, i) => s.send(shapes[i]!.text, key(i, 2)));
    await all((s, i) => s.reached(inFlight[i]!, shapes[i]!.inFlight, TURN_MS));
    await sleep(r.int(0, JITTER_MS));
    await fault.inject(t, r, sessions);
    const ends: TurnEnd[] = await all((s, i) => s.ended(inFlight[i]!, TURN_MS));
    fault.settle?.(sessions);
    if (ends.includes("timeout")) throw new Error(`an in-flight turn did not end within ${TURN_MS} ms (${ends.join(",")})`);

    await all(async (s, i) => (ends[i] === "idle" ? undefined : s.resume()));
    const recovery = await all((s, i) => s.send(`after ${fault.name}`, key(i, 3), { idle: true }));
    await all((s, i) => s.ended(recovery[i]!, TURN_MS));
  } catch (e) {
    report.errors.push(`${fault.name} run ${run}: ${(e as Error).message}`);
  } finally {
    fault.settle?.(sessions);
    await judgeInto(report, sessions);
    report.runs++;
  }
}
