/**
 * The transactional core of one session: metadata, status, input queue and event log, all in the
 * object's SQLite. Every operation that changes state appends its events in the same
 * `transactionSync`, and returns the events it appended so the object can publish them after the
 * commit. Plain module over a narrow storage interface, so it is testable without the object.
 */
import { createHash } from "node:crypto";
import type { Event, EventList, Input, Session, SessionStatus, Status } from "../shared/api-schema.ts";
import type { Limits } from "../shared/config-schema.ts";
import { conflict, cursorUnavailable, invalid, notFound, overloaded, unsupported } from "../shared/errors.ts";
import { byteLength } from "../shared/ids.ts";
import { decodeCursor, encodeCursor, MAX_CURSOR_BYTES } from "./cursor.ts";
import { newId } from "../shared/ids.ts";
import { EventLog, MAX_RECORD_BYTES, type LoggedEvent, type NewEvent } from "./event-log.ts";
import { toSession, type NewSession, type SessionRow } from "./record.ts";
import { RowCache, type Storage } from "./row-cache.ts";

export type { Storage };

export type Change<T> = { value: T; events: LoggedEvent[] };

export type ErrorData = { code: "conflict" | "provider_error" | "service_error"; message: string };

/** What a logged event adds around its `data` (id, type, time, input id, line end), bytes: a bound. */
export const EVENT_ENVELOPE_BYTES = 256;

export class SessionState {
  readonly #storage: Storage;
  readonly #row: RowCache;
  readonly log: EventLog;

  /** `storage`: the object's own; session modules get it back wrapped (see row-cache.ts). */
  constructor(storage: Storage) {
    this.#row = RowCache.of(storage.sql);
    this.#storage = this.#row.wrap(storage);
    this.log = new EventLog(this.#storage.sql);
  }

  /** The session row, from memory after the first read (row-cache.ts says how it stays right). */
  row(): SessionRow | undefined {
    return this.#row.read();
  }

  /** A read held in memory until `table` is written (row-cache.ts). */
  memo<T>(table: string, name: string, read: () => T): T {
    return this.#row.memo(table, name, read);
  }

  /** Sets a `memo` after a write to its table that the caller accounted for (row-cache.ts). */
  remember(table: string, name: string, value: unknown): void {
    this.#row.remember(table, name, value);
  }

  /** Bytes of native state: summed once per object instance, then kept by `addNative`. */
  nativeBytes(): number {
    return this.memo("native", "bytes", () => this.#storage.sql.exec<{ b: number }>("SELECT COALESCE(SUM(bytes), 0) AS b FROM native").one().b);
  }

  /** The last native record's `seq` (0: none): read once per object instance, then kept by `addNative`. */
  nativeSeq(): number {
    return this.memo("native", "seq", () => this.#storage.sql.exec<{ s: number | null }>("SELECT MAX(seq) AS s FROM native").one().s ?? 0);
  }

  /**
   * Appends native records (call inside a transaction). The byte total and the last `seq` move with
   * them instead of being read again: a sum reads every record's row, and a long session has
   * thousands. A record without a `seq` of its own gets one past the largest (SQLite's rowid rule).
   */
  addNative(texts: string[]): void {
    let total = this.nativeBytes();
    const seq = this.nativeSeq();
    for (const text of texts) {
      const bytes = byteLength(text);
      this.#storage.sql.exec("INSERT INTO native (record, bytes) VALUES (?, ?)", text, bytes);
      total += bytes;
    }
    this.remember("native", "bytes", total);
    this.remember("native", "seq", seq + texts.length);
  }

  /** Writes these columns of the session row (and the cached copy). */
  set(fields: Partial<SessionRow>): void {
    this.#row.set(fields);
  }

  /** The session row, or `404 not_found`: an object that was never created looks unknown. */
  require(): SessionRow {
    const r = this.row();
    if (!r) throw notFound("session not found");
    return r;
  }

  create(n: NewSession, now: string): Session {
    if (this.row()) throw conflict("session already exists");
    const bindings = n.credentials.map((c) => c.alias);
    this.#storage.transactionSync(() => {
      this.#storage.sql.exec(
        `INSERT INTO session (id, tenant, harness, config, status, created_at, updated_at, descriptors, credential_bindings, cursor_key, bindings)
         VALUES (?, ?, ?, ?, 'idle', ?, ?, ?, ?, ?, ?)`,
        n.id,
        n.tenant,
        n.harness,
        JSON.stringify(n.config),
        now,
        now,
        JSON.stringify(n.descriptors),
        bindings.length > 0 ? JSON.stringify(bindings) : null,
        newId() + newId(),
        JSON.stringify(n.bindings ?? []),
      );
      for (const c of n.credentials) {
        this.#storage.sql.exec(
          "INSERT INTO credentials (alias, key_id, iv, ciphertext) VALUES (?, ?, ?, ?)",
          c.alias,
          c.key_id,
          c.iv,
          c.ciphertext,
        );
      }
    });
    return toSession(this.require());
  }

  /**
   * Send input (docs/api.md "Sending input"). A repeated idempotency key returns the original
   * event whatever the session's state now; a new `user.message` is recorded and queued for its
   * turn.
   */
  send(input: Input, limits: Limits, now: string, traceparent?: string, blocked?: string): Change<Event | Status> {
    const r = this.require();
    if (input.type === "user.interrupt") {
      if (input.text !== undefined || input.key !== undefined || input.delivery !== undefined) {
        throw invalid("user.interrupt takes no text, key or delivery");
      }
      return this.interrupt(r, now);
    }
    const repeated = this.checkMessage(input, limits, blocked);
    if (repeated) return { value: repeated, events: [] };
    const data = messageData(input);
    const logged = this.#storage.transactionSync(() => {
      const e = this.append({ type: "user.message", data }, now);
      this.#storage.sql.exec(
        "INSERT INTO inputs (seq, event_id, text, state, accepted_at, traceparent) VALUES (?, ?, ?, 'queued', ?, ?)",
        e.seq,
        e.event.id,
        input.text,
        now,
        traceparent ?? null,
      );
      if (input.key !== undefined) this.#keepKey(input.key, inputHash(input.text!), e.seq);
      this.set({ updated_at: now, version: this.require().version + 1 });
      return e;
    });
    return { value: this.withCursor(r, logged.seq, logged.event), events: [logged] };
  }

  /**
   * What a `user.message` gets, without recording it: its original event for a repeated key, an
   * error if the session refuses it now, undefined if it would be recorded. Read before the
   * session is placed for it, so a repeat or a refusal never takes a runner-host's room.
   * `blocked`: why the session cannot run under the configuration now (open-message.ts `runGrant`).
   */
  checkMessage(input: Input, limits: Limits, blocked?: string): Event | undefined {
    const r = this.require();
    if (input.delivery === "steer") throw unsupported("delivery steer is not supported; use queue");
    if (input.delivery !== undefined && input.delivery !== "queue") throw invalid(`delivery: must be "queue"`);
    if (input.text === undefined) throw invalid("text: required for user.message");
    if (byteLength(input.text) > limits.input_bytes) throw invalid(`text: longer than ${limits.input_bytes} bytes`);
    if (input.key !== undefined) {
      const seen = this.#storage.sql
        .exec<{ input_hash: string; event_seq: number }>("SELECT input_hash, event_seq FROM idem_keys WHERE key = ?", input.key)
        .toArray()[0];
      if (seen) {
        if (seen.input_hash !== inputHash(input.text)) throw conflict("idempotency key was already used with different input");
        const original = this.log.at(seen.event_seq)!;
        return this.withCursor(r, original.seq, original.event);
      }
    }
    if (r.status === "interrupted" || r.status === "failed" || r.status === "closed") {
      throw conflict(`session is ${r.status}${r.status === "closed" ? "" : "; resume it first"}`);
    }
    if (blocked) throw unsupported(`${blocked}: the session cannot run`);
    // One read for both checks: the queued inputs, and the bytes of every input not finished.
    const { waiting, unfinished } = this.#storage.sql
      .exec<{ waiting: number; unfinished: number }>(
        "SELECT COUNT(*) FILTER (WHERE state = 'queued') AS waiting, COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0) AS unfinished FROM inputs",
      )
      .one();
    if (waiting >= limits.queue) throw overloaded(`the session queue is full (limits.queue ${limits.queue})`);
    // "Near the limit": the message, what it and every input before it that has not finished will
    // add when it runs (the harness records each prompt in its native state: about its text again),
    // plus one maximal record, so the turn it starts can still record its terminal events.
    const fits = (text: string) =>
      this.storedBytes() + byteLength(JSON.stringify(messageData({ ...input, text }))) + EVENT_ENVELOPE_BYTES + byteLength(text) + unfinished + MAX_RECORD_BYTES <=
      limits.session_bytes;
    if (!fits(input.text!)) {
      // The shortest message (one character) would not fit either: none can.
      const full = !fits("x");
      throw overloaded(
        full
          ? `the session's event log and native state are at their limit (limits.session_bytes ${limits.session_bytes}): no message fits; restore an earlier checkpoint or start a new session`
          : `this message would bring the session's event log and native state near their limit (limits.session_bytes ${limits.session_bytes}); a shorter one may still fit`,
      );
    }
    return undefined;
  }

  /**
   * `user.interrupt`: stops the running turn and cancels queued inputs, then `interrupted`. With
   * nothing running or queued it changes nothing (docs/api.md "Sending input").
   */
  interrupt(r: SessionRow, now: string): Change<Status> {
    if (r.status === "closed") throw conflict("session is closed");
    const pending = this.#storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM inputs").one().n;
    const events = pending > 0 ? this.endWork(now, "interrupted", { queued: "the session was interrupted" }) : [];
    return { value: { status: "interrupt_requested" }, events };
  }

  /** Resume: `interrupted` or `failed` → `idle` (docs/api.md: anything else is 409). */
  resume(now: string): Change<Session> {
    const r = this.require();
    if (r.status !== "interrupted" && r.status !== "failed") throw conflict(`session is ${r.status}; only interrupted or failed sessions resume`);
    const events = this.#storage.transactionSync(() => this.setStatus(now, "idle"));
    return { value: toSession(this.require()), events };
  }

  /**
   * Close is permanent: queued inputs are cancelled (one `session.error conflict` each, in queue
   * order), then one `session.status closed`. Closing a closed session changes nothing.
   */
  close(now: string): Change<Status> {
    const r = this.require();
    if (r.status === "closed") return { value: { status: "closed" }, events: [] };
    const events = this.endWork(now, "closed", { queued: "the session was closed" });
    return { value: { status: "closed" }, events };
  }

  /** A shutdown stops the session's work: `conflict` for each input, then `interrupted`; nothing without input. */
  endForShutdown(now: string, reason: string): LoggedEvent[] {
    const inputs = this.#storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM inputs").one().n;
    return inputs > 0 ? this.endWork(now, "interrupted", { running: { code: "conflict", message: reason }, queued: reason }) : [];
  }

  /**
   * Ends all work of the session in one transaction: every open tool call gets its result (an
   * error, `unknown_outcome` when it had been dispatched), every input gets one `session.error` —
   * the running one first with `running`, the queued ones with `conflict` — then one
   * `session.status`. docs/api.md "Events": cancelling several inputs at once.
   */
  endWork(now: string, to: SessionStatus, why: { running?: ErrorData; queued: string }): LoggedEvent[] {
    return this.#storage.transactionSync(() => {
      const events: LoggedEvent[] = [];
      const sql = this.#storage.sql;
      const calls = sql.exec<{ call_id: string; input_id: string; dispatched: number }>("SELECT * FROM open_calls").toArray();
      for (const c of calls) {
        // An executor's result accepted before the stop (migrations/session/0006_runtime_results.sql) is the outcome.
        const accepted = sql.exec<{ result: string | null }>("SELECT result FROM runtime_calls WHERE call_id = ?", c.call_id).toArray()[0]?.result;
        const result: Record<string, unknown> = accepted
          ? JSON.parse(accepted)
          : { content: [{ type: "text", text: `the tool call was stopped: ${why.running?.message ?? why.queued}` }], is_error: true };
        if (c.dispatched && !accepted) result.unknown_outcome = true;
        events.push(this.append({ type: "tool.result", data: { call_id: c.call_id, result }, input_id: c.input_id }, now));
        sql.exec("INSERT OR IGNORE INTO ended_calls (call_id) VALUES (?)", c.call_id);
      }
      sql.exec("DELETE FROM open_calls");
      const inputs = sql.exec<{ event_id: string; state: string }>("SELECT event_id, state FROM inputs ORDER BY state = 'running' DESC, seq").toArray();
      for (const q of inputs) {
        const data: ErrorData =
          q.state === "running"
            ? (why.running ?? { code: "conflict", message: `the running turn was stopped: ${why.queued}` })
            : { code: "conflict", message: `the queued input was interrupted before execution: ${why.queued}` };
        events.push(this.append({ type: "session.error", data, input_id: q.event_id }, now));
      }
      sql.exec("DELETE FROM inputs");
      events.push(...this.setStatus(now, to));
      return events;
    });
  }

  /**
   * Keeps an idempotency key with what it was used for: the message text and its event. Keys last
   * the session's life (docs/api.md), so a history loaded or restored from storage brings back
   * the keys of the messages it holds.
   */
  rememberKey(key: string, text: string, eventSeq: number): void {
    this.#keepKey(key, inputHash(text), eventSeq);
  }

  #keepKey(key: string, hash: string, eventSeq: number): void {
    this.#storage.sql.exec("INSERT OR REPLACE INTO idem_keys (key, input_hash, event_seq) VALUES (?, ?, ?)", key, hash, eventSeq);
  }

  /** Records a status change (and its event) unless the status is already `to`. */
  setStatus(now: string, to: SessionStatus, inputId?: string): LoggedEvent[] {
    const r = this.require();
    if (r.status === to) return [];
    const e = this.append({ type: "session.status", data: { status: to }, input_id: inputId }, now);
    this.set({ status: to, updated_at: now, version: this.require().version + 1 });
    return [e];
  }

  /**
   * What `limits.session_bytes` bounds: the event history plus the harness's native state (the
   * checkpoint artifact), in bytes.
   */
  storedBytes(): number {
    return this.require().log_bytes + this.nativeBytes();
  }

  /** Appends one retained event and advances the history size. Call inside a transaction. */
  append(e: NewEvent, now: string, id?: string): LoggedEvent {
    const logged = this.log.append(e, now, this.require().log_bytes, id);
    this.set({ log_bytes: logged.endOffset });
    return logged;
  }

  get storage(): Storage {
    return this.#storage;
  }

  /** The event position a client cursor names; `""` is the start of the log. */
  positionOf(r: SessionRow, cursor: string): number {
    if (cursor === "") return 0;
    if (new TextEncoder().encode(cursor).length > MAX_CURSOR_BYTES) throw cursorUnavailable("cursor is over 512 bytes");
    const pos = decodeCursor(r.cursor_key, cursor);
    if (!pos || pos.epoch > r.epoch || pos.seq > this.log.lastSeq()) {
      throw cursorUnavailable("cursor is not a position in this session's event log");
    }
    if (pos.epoch < r.epoch) {
      // A restore (or a load from storage) cut the log since this cursor was issued: positions up
      // to the cut are the same events; past it they were lost (docs/api.md "Flush, sync, restore").
      const cut = this.#storage.sql
        .exec<{ s: number | null }>("SELECT MIN(last_seq) AS s FROM epoch_cuts WHERE epoch >= ?", pos.epoch)
        .one().s;
      if (cut === null || pos.seq > cut) throw cursorUnavailable("cursor points into history lost in a restore or a load from storage");
    }
    return pos.seq;
  }

  withCursor(r: SessionRow, seq: number, e: Event): Event {
    return { ...e, cursor: encodeCursor(r.cursor_key, { epoch: r.epoch, seq }) };
  }

  /** JSON mode: a page of retained events after `cursor`; an empty page returns `cursor` itself. */
  page(cursor: string, limit: number): EventList {
    const r = this.require();
    const after = this.positionOf(r, cursor);
    const events = this.log.read(after, limit).map((l) => this.withCursor(r, l.seq, l.event));
    return { events, next_cursor: events.at(-1)?.cursor ?? cursor };
  }

  /**
   * Marks the index as holding `version`, unless a newer change happened meanwhile. Stored with the
   * next write: an instance that goes away first only pushes that version once more (the index
   * ignores a version it holds).
   */
  markIndexed(version: number): void {
    const r = this.require();
    if (version > r.indexed_version) this.#row.setLater({ indexed_version: version });
  }
}

/** What a key's first use is compared with: the text and the delivery (only `queue` is accepted). */
function inputHash(text: string): string {
  return createHash("sha256").update(JSON.stringify([text, "queue"])).digest("hex");
}

/** The `user.message` event's data, as recorded (and as measured against `limits.session_bytes`). */
function messageData(input: Input): Record<string, unknown> {
  const data: Record<string, unknown> = { type: "user.message", text: input.text, delivery: "queue" };
  if (input.key !== undefined) data.key = input.key;
  return data;
}
