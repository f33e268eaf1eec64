/**
 * Publication of a session's events to its live subscribers, and what a publication ends: the
 * inspection streams of a tool call that got its result (and an executor's work on that call), and
 * every live stream once the session is closed.
 *
 * Publication order is commit order: callers publish what a transaction appended right after it
 * commits, before any await, so no later change's events can go out first (docs/architecture.md).
 * Lifecycle: no state of its own.
 */
import type { Event } from "../shared/api-schema.ts";
import { scheduleExport, type ExportEnv, type KeepAlive } from "../metrics/exporter.ts";
import { metrics } from "../metrics/registry.ts";
import type { SessionRow } from "./record.ts";

/** An event the log recorded, with its position and size (event-log.ts's `LoggedEvent` fits). */
export type Recorded = { seq: number; event: Event; /** NDJSON line bytes. */ bytes: number };

export type PublicationParts = {
  /** The session row and cursors (session-state.ts). */
  state: { require(): SessionRow; withCursor(r: SessionRow, seq: number, e: Event): Event };
  /** Live subscribers (subscribers.ts). */
  subs: { publish(events: Event[]): void; endCall(call: string): void; endLive(): void };
  /** Runtime tool calls (runtime-calls.ts): executors stop working on calls that ended. */
  calls: { ended(callIds: string[]): void };
  /** For the metrics export (src/metrics/exporter.ts): the object's env and `waitUntil`. */
  env: ExportEnv;
  keepAlive: KeepAlive;
};

export class Publication {
  readonly #p: PublicationParts;

  constructor(parts: PublicationParts) {
    this.#p = parts;
  }

  /** Publishes, in order, events the log recorded (with cursors) and live-only ones. */
  publish(out: (Recorded | Event)[]): void {
    if (out.length === 0) return;
    const { state, subs, calls } = this.#p;
    const events = out.filter((x): x is Recorded => "seq" in x);
    const row = state.require();
    subs.publish(out.map((x) => ("seq" in x ? state.withCursor(row, x.seq, x.event) : x)));
    if (events.length === 0) return;
    metrics.counter("svc.transcript.bytes").add(events.reduce((n, l) => n + l.bytes, 0));
    scheduleExport(this.#p.env, this.#p.keepAlive);
    // Streams opened with an inspection token end with their tool call; executors stop working on it.
    const ended = events.filter((l) => l.event.type === "tool.result").map((l) => String(l.event.data.call_id));
    for (const id of ended) subs.endCall(id);
    if (ended.length > 0) calls.ended(ended);
    if (row.status === "closed") subs.endLive();
  }
}
