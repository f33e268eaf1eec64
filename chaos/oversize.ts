/**
 * The oversize native state fault: tenant A grows its native state past the reference harness's
 * 8 MiB line limit (three turns of ~3 MiB output), fails a turn (a provider error), resumes and
 * sends — which re-opens its session from that state — while tenant B's turn runs in the same
 * harness process (a 3–6 s streamed reply, so the re-open lands while it runs). One tenant's
 * fault must stay with that tenant: B's turn must end `idle`, and so must A's (its state is far
 * below `limits.session_bytes`). A is grown once and the fail/resume/send cycle repeats once per
 * run, as a hostile tenant could.
 */
import type { Rng } from "./rng.ts";
import { judgeInto, TURN_MS, type FaultReport } from "./run.ts";
import { SessionClient } from "./session-client.ts";
import type { Topology } from "./topology.ts";

/** Output turns that grow A's state: 3 × 768 deltas of 4096 characters ≈ 9.4 MiB, over 8 MiB. */
const GROW_TURNS = 3;
const GROW_TEXT = "[[deltas 768 size=4096]]";
/** A large turn streams ~3 MiB through every layer: more time than a normal turn, ms. */
const GROW_MS = 180_000;

export async function runOversize(t: Topology, r: Rng, runs: number, deadline: number, report: FaultReport): Promise<void> {
  const api = { base: t.base, gate: t.gate };
  const a = await SessionClient.create(api, t.tokens.a);
  const key = (run: number, step: string) => `chaos-oversize-${run}-${step}`;
  try {
    for (let i = 0; i < GROW_TURNS; i++) {
      const id = await a.send(GROW_TEXT, key(-1, `grow${i}`), { idle: true });
      const end = await a.ended(id, GROW_MS);
      if (end !== "idle") throw new Error(`growing the native state: turn ${i} ended ${end}`);
    }
    for (let run = 0; run < runs && Date.now() < deadline; run++) {
      const b = await SessionClient.create(api, t.tokens.b);
      try {
        const failing = await a.send("[[error 500 chaos: the provider failed]]", key(run, "fail"));
        const failed = await a.ended(failing, TURN_MS);
        if (failed === "timeout") throw new Error("A's failing turn did not end");
        if (failed !== "idle") await a.resume();

        const bTurn = await b.send(`[[deltas ${r.int(100, 160)} size=8]] [[delay ${r.int(30, 40)}]]`, key(run, "b"), { idle: true });
        await b.reached(bTurn, ["session.status"], TURN_MS);
        const aTurn = await a.send(`again ${run}`, key(run, "a"), { idle: true });
        const [aEnd, bEnd] = await Promise.all([a.ended(aTurn, TURN_MS), b.ended(bTurn, TURN_MS)]);
        if (aEnd === "timeout" || bEnd === "timeout") throw new Error(`a turn did not end (A ${aEnd}, B ${bEnd})`);
        if (aEnd !== "idle") await a.resume();
      } catch (e) {
        report.errors.push(`oversize run ${run}: ${(e as Error).message}`);
      } finally {
        await judgeInto(report, [b]);
        report.runs++;
      }
    }
  } catch (e) {
    report.errors.push(`oversize: ${(e as Error).message}`);
  } finally {
    await judgeInto(report, [a]);
  }
}
