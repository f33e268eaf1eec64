/**
 * The retained event log of one session, in the SessionObject's SQLite.
 *
 * Storage layout: `events` holds one row per retained event with its NDJSON line (the envelope
 * without `cursor`) in `data`; a line larger than CHUNK_BYTES leaves `data` NULL and is stored as
 * UTF-8 slices in `event_chunks` (the platform caps a row at 2 MB, a record may be 4 MiB).
 * `seq` is the position that cursors encode; `end_offset` is the byte offset just past the line in
 * the session's NDJSON history (the unit of checkpoints and `session_bytes`).
 *
 * Lifecycle: append only. Callers run `append` inside the transaction that makes the state change
 * the event reports, so a change and its event commit together or not at all.
 */
import type { Event } from "../shared/api-schema.ts";
import { concatBytes } from "../shared/bytes.ts";
import { newId } from "../shared/ids.ts";

/** A retained record is at most 4 MiB (its NDJSON line, in bytes; docs/api.md "Limits"). */
export const MAX_RECORD_BYTES = 4 * 1024 * 1024;
/**
 * Byte budget of one read (a JSON page or an SSE replay batch), counted in NDJSON line bytes: RPC
 * values and WebSocket messages are capped at 32 MiB, so a page of large records stops early. A
 * read always returns at least one event, and a record is at most 4 MiB, so it always fits.
 */
export const READ_BYTES = 8 * 1024 * 1024;
/** Bytes per chunk row: well under the 2 MB SQLite row cap so a row never hits SQLITE_TOOBIG. */
export const CHUNK_BYTES = 1_000_000;

export type NewEvent = { type: string; data: Record<string, unknown>; input_id?: string };
export type LoggedEvent = { seq: number; event: Event; endOffset: number; /** NDJSON line bytes, newline included. */ bytes: number };

type Row = { seq: number; data: string | null; chunks: number; end_offset: number; bytes: number };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class RecordTooLarge extends Error {}

export class EventLog {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
  }

  /** Appends one retained event. Must run inside the caller's `transactionSync`. */
  append(e: NewEvent, time: string, logBytes: number, id: string = newId()): LoggedEvent {
    const event: Event = { id, type: e.type, time, data: e.data };
    if (e.input_id !== undefined) event.input_id = e.input_id;
    const line = JSON.stringify(event);
    const bytes = encoder.encode(line);
    if (bytes.byteLength > MAX_RECORD_BYTES) {
      throw new RecordTooLarge(`event record of ${bytes.byteLength} bytes is over ${MAX_RECORD_BYTES}`);
    }
    const lineBytes = bytes.byteLength + 1;
    const endOffset = logBytes + lineBytes;
    const big = bytes.byteLength > CHUNK_BYTES;
    const nchunks = big ? Math.ceil(bytes.byteLength / CHUNK_BYTES) : 0;
    const { seq } = this.#sql
      .exec<{ seq: number }>(
        "INSERT INTO events (id, type, time, input_id, data, chunks, bytes, end_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
        event.id,
        event.type,
        time,
        e.input_id ?? null,
        big ? null : line,
        nchunks,
        lineBytes,
        endOffset,
      )
      .one();
    for (let n = 0; n < nchunks; n++) {
      const part = bytes.subarray(n * CHUNK_BYTES, (n + 1) * CHUNK_BYTES);
      this.#sql.exec("INSERT INTO event_chunks (seq, n, part) VALUES (?, ?, ?)", seq, n, part);
    }
    return { seq, event, endOffset, bytes: lineBytes };
  }

  /** Events with `seq > after`, oldest first: at most `limit`, and stopping past `maxBytes` (at least one event). */
  read(after: number, limit: number, maxBytes = READ_BYTES): LoggedEvent[] {
    const sizes = this.#sql
      .exec<{ bytes: number }>("SELECT bytes FROM events WHERE seq > ? ORDER BY seq LIMIT ?", after, limit)
      .toArray();
    let n = 0;
    let total = 0;
    while (n < sizes.length && (n === 0 || total + sizes[n]!.bytes <= maxBytes)) total += sizes[n++]!.bytes;
    const rows = this.#sql
      .exec<Row>("SELECT seq, data, chunks, end_offset, bytes FROM events WHERE seq > ? ORDER BY seq LIMIT ?", after, n)
      .toArray();
    return rows.map((r) => ({ seq: r.seq, event: JSON.parse(this.#line(r)) as Event, endOffset: r.end_offset, bytes: r.bytes }));
  }

  /**
   * Whole NDJSON lines of the history from byte `start` (a line boundary), oldest first: at most
   * `maxBytes` in all (a longer first line comes alone, never split), and none past byte `until`.
   */
  lines(start: number, maxBytes: number, until = Number.MAX_SAFE_INTEGER): { line: string; end: number }[] {
    const out: { line: string; end: number }[] = [];
    let total = 0;
    const rows = this.#sql.exec<Row & { bytes: number }>(
      "SELECT seq, data, chunks, end_offset, bytes FROM events WHERE end_offset > ? AND end_offset <= ? ORDER BY end_offset",
      start,
      until,
    );
    for (const r of rows) {
      if (out.length > 0 && total + r.bytes > maxBytes) break;
      total += r.bytes;
      out.push({ line: this.#line(r), end: r.end_offset });
    }
    return out;
  }

  /** How many events end at or before byte `offset`. */
  countUntil(offset: number): number {
    return this.#sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM events WHERE end_offset <= ?", offset).one().n;
  }

  /** The event recorded at `seq`, if any. */
  at(seq: number): LoggedEvent | undefined {
    return this.read(seq - 1, 1).find((e) => e.seq === seq);
  }

  lastSeq(): number {
    return this.#sql.exec<{ s: number | null }>("SELECT MAX(seq) AS s FROM events").one().s ?? 0;
  }

  #line(r: Row): string {
    if (r.data !== null) return r.data;
    const parts = this.#sql
      .exec<{ part: ArrayBuffer }>("SELECT part FROM event_chunks WHERE seq = ? ORDER BY n", r.seq)
      .toArray()
      .map((p) => new Uint8Array(p.part));
    return decoder.decode(concatBytes(parts));
  }
}
