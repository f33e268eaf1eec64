/**
 * Turn execution on the object side: which input runs, what a runner-host's messages do to the
 * log, and how a turn ends (docs/api.md "Turns", "Events").
 *
 * Storage: `inputs.state` is `queued` or `running` (at most one running); `open_calls` holds tool
 * calls without a result; `native` the harness state; `checkpoints` one row per completed turn.
 * Every runner message is applied in one transaction together with `session.up_seq`, so a message
 * resent after a reconnect is recognised and applied once.
 */
import type { Event } from "../shared/api-schema.ts";
import { newId } from "../shared/ids.ts";
import type { LinkUp } from "../shared/runner-protocol.ts";
import type { LoggedEvent } from "./event-log.ts";
import type { ErrorData, SessionState } from "./session-state.ts";

/**
 * Log space kept free for the events that end work (one error per input, at most 1024 queued, and a
 * status), bytes: a turn's own events fail it before they could crowd those out.
 */
const TERMINAL_RESERVE = 1024 * 1024;

export type RunningInput = { event_id: string; text: string; traceparent: string | null; accepted_at: string };
/** The `inputs` columns a RunningInput holds. */
const RUNNING_COLUMNS = "event_id, text, traceparent, accepted_at";

type Numbered = Extract<LinkUp, { seq: number }>;

/** What applying a runner message asks the object to do next. */
export type Applied = {
  events: LoggedEvent[];
  /** The turn ended (any way): look for the next queued input. */
  next?: boolean;
  /** The runner-host no longer holds the session. */
  detached?: boolean;
  /** The harness opened the session: runs may start. */
  opened?: boolean;
};

export class Turns {
  readonly #s: SessionState;

  constructor(state: SessionState) {
    this.#s = state;
  }

  get #sql() {
    return this.#s.storage.sql;
  }

  /** Read once per change of `inputs`: every delta and runner message asks. */
  running(): RunningInput | undefined {
    return this.#s.memo("inputs", "running", () =>
      this.#sql.exec<RunningInput>(`SELECT ${RUNNING_COLUMNS} FROM inputs WHERE state = 'running'`).toArray()[0],
    );
  }

  hasQueued(): boolean {
    return this.#s.memo("inputs", "queued", () => this.#sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM inputs WHERE state = 'queued'").one().n > 0);
  }

  /** Starts the oldest queued input: `running` (with its event) unless already running. */
  start(now: string): { input: RunningInput; events: LoggedEvent[] } | undefined {
    if (this.running()) return undefined;
    return this.#s.storage.transactionSync(() => {
      const next = this.#sql.exec<{ seq: number }>("SELECT seq FROM inputs WHERE state = 'queued' ORDER BY seq LIMIT 1").toArray()[0];
      if (!next) return undefined;
      // The input comes back from the UPDATE itself, and is the running one from now on.
      const input = this.#sql.exec<RunningInput>(`UPDATE inputs SET state = 'running' WHERE seq = ? RETURNING ${RUNNING_COLUMNS}`, next.seq).one();
      this.#s.remember("inputs", "running", input);
      return { input, events: this.#s.setStatus(now, "running", input.event_id) };
    });
  }

  /** Live-only events: published, never stored. */
  live(m: Extract<LinkUp, { t: "delta" } | { t: "progress" }>, now: string): Event | undefined {
    if (this.running()?.event_id !== m.turn) return undefined;
    const data = m.t === "delta" ? { text: m.text } : { call_id: m.call_id, data: m.data };
    return { id: newId(), type: m.t === "delta" ? "assistant.delta" : "tool.progress", time: now, data, input_id: m.turn };
  }

  /** Whether a tool call's `tool.result` is recorded: an inspection token for it is spent. */
  callEnded(callId: string): boolean {
    return this.#sql.exec("SELECT 1 FROM ended_calls WHERE call_id = ?", callId).toArray().length > 0;
  }

  /**
   * Applies one numbered runner message exactly once (resends at or below `up_seq` are skipped).
   * Throws (and changes nothing) when the turn's events or native records would not fit: event
   * history plus native state past `sessionBytes` less TERMINAL_RESERVE, or a record over 4 MiB.
   */
  apply(m: Numbered, now: string, sessionBytes: number): Applied | "duplicate" | "gap" {
    return this.#s.storage.transactionSync(() => {
      const row = this.#s.require();
      if (m.seq <= row.up_seq) return "duplicate";
      if (m.seq !== row.up_seq + 1) return "gap";
      this.#s.set({ up_seq: m.seq });
      const applied = this.#applyOne(m, now);
      if (this.#s.storedBytes() > sessionBytes - TERMINAL_RESERVE) {
        throw new Error(`the session's event log and native state would pass limits.session_bytes (${sessionBytes})`);
      }
      return applied;
    });
  }

  #applyOne(m: Numbered, now: string): Applied {
    const turn = this.running()?.event_id;
    switch (m.t) {
      case "opened":
        this.#s.set({ link_state: "open" });
        return { events: [], opened: true };
      case "open_failed": {
        this.#s.set({ link_state: "none" });
        return { events: this.failNext(now, m.message), detached: true };
      }
      case "native":
        this.#s.addNative(m.records.map((r) => JSON.stringify(r)));
        return { events: [] };
      case "assistant":
        if (m.turn !== turn) return { events: [] };
        return {
          events: [this.#s.append({ type: "assistant.message", data: { text: m.text, usage: m.usage, stop_reason: m.stop_reason }, input_id: turn }, now)],
        };
      case "tool_call": {
        if (m.turn !== turn) return { events: [] };
        this.#sql.exec(
          "INSERT OR IGNORE INTO open_calls (call_id, input_id, dispatched, tool) VALUES (?, ?, ?, ?)",
          m.call.id,
          turn,
          m.dispatched ? 1 : 0,
          m.call.name,
        );
        // The call id is also the event id (docs/api.md "Tools": `call_id` is the `tool.call` event's id).
        const data = { id: m.call.id, name: m.call.name, arguments: m.call.arguments };
        return { events: [this.#s.append({ type: "tool.call", data, input_id: turn }, now, m.call.id)] };
      }
      case "tool_result": {
        const open = this.#sql.exec("SELECT 1 FROM open_calls WHERE call_id = ?", m.call_id).toArray().length > 0;
        if (!open || m.turn !== turn) return { events: [] };
        this.#sql.exec("DELETE FROM open_calls WHERE call_id = ?", m.call_id);
        this.#sql.exec("INSERT OR IGNORE INTO ended_calls (call_id) VALUES (?)", m.call_id);
        return { events: [this.#s.append({ type: "tool.result", data: { call_id: m.call_id, result: m.result }, input_id: turn }, now)] };
      }
      case "turn_end":
        if (m.turn !== turn) return { events: [] };
        return { events: this.#end(m, now), next: true };
      case "detached": {
        this.#s.set({ link_state: "none" });
        if (turn && m.yielded) {
          // Never started there: the input waits at the head of the queue for the next placement
          // (the status stays `running`; its start emits nothing new).
          this.#sql.exec("UPDATE inputs SET state = 'queued' WHERE state = 'running'");
          return { events: [], detached: true, next: true };
        }
        if (m.shutdown) {
          // A shutdown interrupts the session's work (a turn whose `run` crossed the drain included),
          // so nothing accepted before it runs after the restart unannounced.
          return { events: this.#s.endForShutdown(now, m.reason), detached: true, next: true };
        }
        const events = turn
          ? this.#s.endWork(now, "failed", {
              running: { code: "service_error", message: `the harness let go of the session mid-turn: ${m.reason}` },
              queued: "the session failed",
            })
          : [];
        return { events, detached: true, next: true };
      }
    }
  }

  /**
   * The input that would run next cannot (its harness could not open the session, or the session
   * cannot run under the configuration): it begins (`running`, as every turn does: an unsupported
   * model fails from `running`, docs/api.md "Turns") and fails with `message` (`service_error`),
   * later inputs are cancelled, and the session is `failed`. Nothing when it holds no input.
   */
  failNext(now: string, message: string): LoggedEvent[] {
    const first = this.#sql.exec<{ seq: number; event_id: string }>("SELECT seq, event_id FROM inputs ORDER BY seq LIMIT 1").toArray()[0];
    if (!first) return [];
    this.#sql.exec("UPDATE inputs SET state = 'running' WHERE seq = ?", first.seq);
    return [
      ...this.#s.setStatus(now, "running", first.event_id),
      ...this.#s.endWork(now, "failed", { running: { code: "service_error", message }, queued: "the session failed" }),
    ];
  }

  #end(m: Extract<LinkUp, { t: "turn_end" }>, now: string): LoggedEvent[] {
    if (m.status === "completed") {
      this.#sql.exec("DELETE FROM inputs WHERE state = 'running'");
      // The checkpoint comes after the turn's last event, so a restore or load to it ends idle.
      const events = this.hasQueued() ? [] : this.#s.setStatus(now, "idle", m.turn);
      this.#checkpoint(now);
      return events;
    }
    const error: ErrorData = m.error ?? { code: "service_error", message: "the turn failed" };
    // provider_error and conflict (interrupt, shutdown) → interrupted; anything else → failed.
    const to = error.code === "service_error" ? "failed" : "interrupted";
    return this.#s.endWork(now, to, { running: error, queued: `the turn before it ended with ${error.code}` });
  }

  /**
   * The close's checkpoint, the session's last: the history through the close, so storage keeps the
   * close and a session loaded from it comes back `closed`; the native state of the last completed
   * turn (a closed session never runs again).
   */
  closeCheckpoint(now: string): void {
    this.#checkpoint(now, this.#lastCheckpointNative());
  }

  /** A checkpoint at a completed turn: the history offset and the native state up to now. */
  #checkpoint(now: string, nativeSeq = this.#s.nativeSeq()): void {
    const id = newId();
    const row = this.#s.require();
    this.#sql.exec(
      "INSERT INTO checkpoints (id, event_offset, native_seq, time) VALUES (?, ?, ?, ?)",
      id,
      row.log_bytes,
      nativeSeq,
      now,
    );
    this.#s.set({ checkpoint: JSON.stringify({ id, offset: row.log_bytes, time: now }) });
  }

  /** Resume: native state back to the last completed checkpoint (the event log keeps all). */
  revertNative(): void {
    this.#sql.exec("DELETE FROM native WHERE seq > ?", this.#lastCheckpointNative());
  }

  /** The last native record the latest checkpoint holds (0: no checkpoint yet). */
  #lastCheckpointNative(): number {
    return this.#sql.exec<{ native_seq: number }>("SELECT native_seq FROM checkpoints ORDER BY event_offset DESC LIMIT 1").toArray()[0]?.native_seq ?? 0;
  }

  /** The sizes of native records after `after` (UTF-8 bytes of each record's JSON), in order. */
  nativeSizes(after: number, limit: number): { seq: number; bytes: number }[] {
    return this.#sql.exec<{ seq: number; bytes: number }>("SELECT seq, bytes FROM native WHERE seq > ? ORDER BY seq LIMIT ?", after, limit).toArray();
  }
}
