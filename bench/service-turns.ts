/**
 * The service as one column of a side-by-side bench: a session with its SSE stream open for the
 * whole run, and turns measured on it the way latency.ts / throughput.ts / concurrency.ts do:
 * `POST /sessions/{id}/events` (user.message) → the turn's `session.status` idle frame (its end);
 * first/last text = the first/last `assistant.delta` frame; text = the deltas joined. A turn that
 * ends failed or interrupted (a `session.error` naming its input) throws after the session was
 * resumed, as a client would, so a closed loop can go on.
 */
import { api, auth, now, request, sleep, type Turn } from "./lib.ts";

/** How long a turn may take before the bench gives up on it, ms. */
const TURN_TIMEOUT_MS = 120_000;

type Cur = { parts: string[]; first: number; last: number; firstInput: string; ends: Map<string, { how: string; t: number }>; wake(): void };

export async function openSession(base: string, harness: string) {
  const a = api(base);
  const id = await a.create(harness);
  let cur: Cur | undefined;
  const h = a.stream(id, (event, data, t) => {
    if (!cur) return;
    const e = JSON.parse(data);
    if (event === "assistant.delta") {
      if (cur.parts.length === 0) [cur.first, cur.firstInput] = [t, e.input_id];
      cur.last = t;
      cur.parts.push(e.data.text);
    } else if ((event === "session.status" && e.input_id && e.data.status !== "running") || (event === "session.error" && e.input_id)) {
      cur.ends.set(e.input_id, { how: event === "session.error" ? `error ${e.data.code}: ${e.data.message}` : e.data.status, t });
      cur.wake();
    }
  });
  await h.ready;
  return {
    id,
    close: () => h.close(),
    async turn(text: string): Promise<Turn> {
      const c: Cur = { parts: [], first: NaN, last: NaN, firstInput: "", ends: new Map(), wake: () => {} };
      cur = c;
      try {
        const t0 = now();
        const input = await a.send(id, text);
        const deadline = t0 + TURN_TIMEOUT_MS;
        while (!c.ends.has(input)) {
          if (now() > deadline) throw new Error(`turn ${input} did not end within ${TURN_TIMEOUT_MS} ms`);
          await new Promise<void>((r) => ((c.wake = r), setTimeout(r, 1000)));
        }
        const end = c.ends.get(input)!;
        if (end.how !== "idle") {
          for (let i = 0; i < 50 && (await request("POST", `${base}/sessions/${id}/resume`, {}, auth)).status !== 200; i++) await sleep(100);
          throw new Error(`turn ended with ${end.how}`);
        }
        if (c.parts.length && c.firstInput !== input) throw new Error("first delta belongs to another input");
        return { firstMs: c.first - t0, lastMs: c.last - t0, endMs: end.t - t0, text: c.parts.join("") };
      } finally {
        cur = undefined;
      }
    },
  };
}
export type ServiceSession = Awaited<ReturnType<typeof openSession>>;
