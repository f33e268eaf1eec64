/**
 * The verdict on one session after chaos: what a client streamed (over SSE, across every
 * reconnect) against the final JSON page read of the log, and the log against the turn end states
 * of docs/api.md "Turns". Pure: fed plain data, unit-tested on its own.
 *
 * - lost: a retained event in the log the stream never delivered, one the stream delivered that
 *   the log no longer has, or a `user.message` acknowledged with 202 that is not in the log.
 * - doubled: an event id delivered twice over the stream (a resume that replayed it), or twice in
 *   the log.
 * - misplaced: the stream's order or a cursor differs from the log's.
 * - bad_end: a turn that does not end in a documented end state: `session.status` `idle` with its
 *   `input_id`, or `session.error` (with its `input_id`) then `session.status` whose status fits
 *   the code (`provider_error` → interrupted, `conflict` → interrupted or closed, any other code →
 *   failed); a turn with no end, an event of a turn after it ended, a `tool.call` without exactly
 *   one later `tool.result`, or a final session status that is not the log's last one.
 * - harmed: a turn the scenario expects to end `idle` (a bystander of another tenant's fault, or a
 *   recovery turn after the fault ended) that ended otherwise, in a documented end state or not.
 */
import type { Event } from "../src/shared/api-schema.ts";

export type SessionObservation = {
  session: string;
  /** Retained events in arrival order over every stream connection, duplicates kept. */
  streamed: Event[];
  /** Ids of the `user.message` events the service acknowledged with 202. */
  accepted: string[];
  /** The whole log, read as JSON pages after the run. */
  log: Event[];
  /** `status` of GET /sessions/{id} after the run. */
  finalStatus: string;
  /** `user.message` ids whose turn must end `idle`. */
  expectIdle: ReadonlySet<string>;
};

export type Verdict = {
  lost: number;
  doubled: number;
  misplaced: number;
  badEnds: number;
  harmed: number;
  /** Turn endings seen: `idle`, or `<status>/<code>`. */
  outcomes: Record<string, number>;
  problems: string[];
};

const ENDS_BY_CODE: Record<string, readonly string[]> = {
  provider_error: ["interrupted"],
  conflict: ["interrupted", "closed"],
};
/** Any other code is internal: it ends `failed` (docs/api.md "Turns"). */
const INTERNAL_END = ["failed"];

export function judgeSession(o: SessionObservation): Verdict {
  const v: Verdict = { lost: 0, doubled: 0, misplaced: 0, badEnds: 0, harmed: 0, outcomes: {}, problems: [] };
  const note = (field: "lost" | "doubled" | "misplaced" | "badEnds" | "harmed", problem: string) => {
    v[field]++;
    if (v.problems.length < 20) v.problems.push(`${o.session}: ${problem}`);
  };
  compareStreamWithLog(o, note);
  const ends = checkStateTable(o, (p) => note("badEnds", p));
  for (const [input, end] of ends) {
    v.outcomes[end] = (v.outcomes[end] ?? 0) + 1;
    if (o.expectIdle.has(input) && end !== "idle") note("harmed", `turn ${input} was expected to end idle, ended ${end}`);
  }
  return v;
}

type Note = (field: "lost" | "doubled" | "misplaced", problem: string) => void;

function compareStreamWithLog(o: SessionObservation, note: Note): void {
  const logIndex = new Map<string, number>();
  o.log.forEach((e, i) => {
    if (logIndex.has(e.id)) note("doubled", `event ${e.id} (${e.type}) is twice in the log`);
    else logIndex.set(e.id, i);
  });
  const firstSeen = new Map<string, Event>();
  let lastIndex = -1;
  for (const e of o.streamed) {
    if (firstSeen.has(e.id)) {
      note("doubled", `event ${e.id} (${e.type}) was streamed twice`);
      continue;
    }
    firstSeen.set(e.id, e);
    const i = logIndex.get(e.id);
    if (i === undefined) {
      note("lost", `streamed event ${e.id} (${e.type}) is not in the log`);
      continue;
    }
    if (i < lastIndex) note("misplaced", `event ${e.id} (${e.type}) was streamed after a later event of the log`);
    lastIndex = Math.max(lastIndex, i);
    if (e.cursor !== o.log[i]!.cursor) note("misplaced", `event ${e.id} was streamed with another cursor than the log's`);
  }
  for (const e of o.log) if (!firstSeen.has(e.id)) note("lost", `logged event ${e.id} (${e.type}) was never streamed`);
  for (const id of o.accepted) if (!logIndex.has(id)) note("lost", `accepted user.message ${id} is not in the log`);
}

/** Walks the log; returns each turn's ending (`idle` or `<status>/<code>`) by `user.message` id. */
function checkStateTable(o: SessionObservation, bad: (problem: string) => void): Map<string, string> {
  const ends = new Map<string, string>();
  const open = new Set<string>();
  /** `session.error` events waiting for the `session.status` that must follow them. */
  let erred: { input: string; code: string }[] = [];
  const calls = new Map<string, { input?: string; results: number }>();
  let lastStatus: string | undefined;

  for (const e of o.log) {
    const input = e.input_id;
    if (erred.length > 0 && e.type !== "session.error" && e.type !== "session.status") {
      bad(`${e.type} ${e.id} came between session.error and its session.status`);
    }
    if (e.type === "user.message") {
      open.add(e.id);
      continue;
    }
    if (input !== undefined && !open.has(input)) {
      bad(ends.has(input) ? `${e.type} ${e.id} of turn ${input} came after the turn ended ${ends.get(input)}` : `${e.type} ${e.id} names unknown input ${input}`);
      continue;
    }
    if (e.type === "tool.call") {
      const id = String(e.data.id);
      if (calls.has(id)) bad(`tool.call ${id} was recorded twice`);
      calls.set(id, { input, results: 0 });
    } else if (e.type === "tool.result") {
      const c = calls.get(String(e.data.call_id));
      if (!c) bad(`tool.result for ${String(e.data.call_id)} has no earlier tool.call`);
      else c.results++;
    } else if (e.type === "session.error") {
      if (input === undefined) bad(`session.error ${e.id} carries no input_id`);
      else erred.push({ input, code: String(e.data.code) });
    } else if (e.type === "session.status") {
      const status = String(e.data.status);
      lastStatus = status;
      if (erred.length > 0) {
        for (const er of erred) {
          const allowed = ENDS_BY_CODE[er.code] ?? INTERNAL_END;
          if (!allowed.includes(status)) bad(`session.error ${er.code} of turn ${er.input} was followed by status ${status}`);
          open.delete(er.input);
          ends.set(er.input, `${status}/${er.code}`);
        }
        erred = [];
      } else if (status === "idle" && input !== undefined) {
        open.delete(input);
        ends.set(input, "idle");
      } else if (status !== "running" && status !== "idle") {
        bad(`session.status ${status} ${e.id} without a session.error before it`);
      }
    }
  }
  if (erred.length > 0) bad(`session.error of turn ${erred[0]!.input} has no session.status after it`);
  for (const input of open) bad(`turn ${input} never ended`);
  for (const [id, c] of calls) if (c.results !== 1) bad(`tool.call ${id} has ${c.results} tool.result events`);
  if (lastStatus !== undefined && lastStatus !== o.finalStatus) bad(`the session reads ${o.finalStatus} but its last session.status is ${lastStatus}`);
  return ends;
}

/** Sums verdicts (one fault's runs). */
export function addVerdicts(a: Verdict, b: Verdict): Verdict {
  const outcomes = { ...a.outcomes };
  for (const [k, n] of Object.entries(b.outcomes)) outcomes[k] = (outcomes[k] ?? 0) + n;
  return {
    lost: a.lost + b.lost,
    doubled: a.doubled + b.doubled,
    misplaced: a.misplaced + b.misplaced,
    badEnds: a.badEnds + b.badEnds,
    harmed: a.harmed + b.harmed,
    outcomes,
    problems: [...a.problems, ...b.problems].slice(0, 40),
  };
}

export const emptyVerdict = (): Verdict => ({ lost: 0, doubled: 0, misplaced: 0, badEnds: 0, harmed: 0, outcomes: {}, problems: [] });

export const violations = (v: Verdict): number => v.lost + v.doubled + v.misplaced + v.badEnds + v.harmed;
