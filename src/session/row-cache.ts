/**
 * The session row (`SELECT * FROM session`), held in memory between the steps of one object
 * instance instead of being read again at every step; and a few other hot reads (`memo`, e.g. the
 * running input), each held until a statement writes its table.
 *
 * Lifecycle: SQLite stays the only truth. A new object instance (first request, after eviction or
 * a restart) starts with nothing cached and reads the row on first use. Writes keep the copy equal
 * to the table:
 * - `SessionState.set` patches the copy and writes the named columns; inside a transaction the
 *   columns are collected and written in one UPDATE when the outermost transaction ends (before it
 *   commits), so a step that moves several columns (`up_seq`, `log_bytes`, `status`, ...) costs
 *   one statement; a statement through the wrapped storage that names the `session` table writes
 *   the collected columns first;
 * - any other statement that writes the `session` table through the wrapped storage (importer,
 *   rebind) drops the copy, so the next read goes to SQLite (and likewise a memo's table);
 * - a transaction that throws (and so rolls back) puts the copy and the collected columns back as
 *   they were when it began, and drops the memos.
 * A patch replaces the cached object instead of changing it, so a caller holding an earlier row
 * (e.g. the version an index push is about) keeps that snapshot.
 *
 * The copy is shared by every SessionState over the same SQL handle (keyed by it), so a second
 * SessionState built over the object's storage (tests, tools) sees and keeps the same row.
 */
import type { SessionRow } from "./record.ts";

export type Storage = Pick<DurableObjectStorage, "sql" | "transactionSync">;

/** A statement that changes a table, and which table (group 1). */
const WRITES = /^\s*(?:UPDATE|INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|DELETE\s+FROM)\s+(\w+)/i;
/** A statement that reads or writes the `session` table. */
const NAMES_SESSION = /\bsession\b/i;

const caches = new WeakMap<SqlStorage, RowCache>();

export class RowCache {
  /** `null`: not read since the last drop; `undefined`: read, and there is no session row. */
  #row: SessionRow | undefined | null = null;
  /** Memoised reads by table, then by name. */
  readonly #memos = new Map<string, Map<string, unknown>>();
  /** Columns set inside the current transaction, not written yet. */
  #dirty: Partial<SessionRow> | undefined;
  /** Nesting depth of transactions through the wrapped storage. */
  #depth = 0;
  readonly #sql: SqlStorage;

  private constructor(sql: SqlStorage) {
    this.#sql = sql;
  }

  static of(sql: SqlStorage): RowCache {
    let c = caches.get(sql);
    if (!c) caches.set(sql, (c = new RowCache(sql)));
    return c;
  }

  read(): SessionRow | undefined {
    if (this.#row === null) this.#row = this.#sql.exec<SessionRow>("SELECT * FROM session LIMIT 1").toArray()[0];
    return this.#row;
  }

  /**
   * Sets `fields` in the copy and the row: at once outside a transaction, at the end of the
   * outermost one inside. Columns come from the row type, never from input.
   */
  set(fields: Partial<SessionRow>): void {
    const row = this.read();
    if (row) this.#row = { ...row, ...fields };
    if (this.#depth > 0) {
      this.#dirty = { ...this.#dirty, ...fields };
      return;
    }
    this.#write({ ...this.#dirty, ...fields });
  }

  /**
   * Sets `fields` in the copy now and in the row with the next write (the next `set` outside a
   * transaction, the end of the next transaction). Only for columns where a stored value that is
   * older is harmless when the instance goes away first (`indexed_version`: one redundant push).
   */
  setLater(fields: Partial<SessionRow>): void {
    const row = this.read();
    if (row) this.#row = { ...row, ...fields };
    this.#dirty = { ...this.#dirty, ...fields };
  }

  #write(fields: Partial<SessionRow>): void {
    this.#dirty = undefined;
    const keys = Object.keys(fields) as (keyof SessionRow)[];
    if (keys.length === 0) return;
    this.#sql.exec(`UPDATE session SET ${keys.map((k) => `${k} = ?`).join(", ")}`, ...keys.map((k) => fields[k] ?? null));
  }

  #flush(): void {
    if (this.#dirty) this.#write(this.#dirty);
  }

  /** `read()`, kept until a statement writes `table` (through the wrapped storage) or a rollback. */
  memo<T>(table: string, name: string, read: () => T): T {
    const m = this.#memosOf(table);
    if (m.has(name)) return m.get(name) as T;
    const v = read();
    m.set(name, v);
    return v;
  }

  /** Sets a memo after a write to its table that the caller accounted for (the write dropped it). */
  remember(table: string, name: string, value: unknown): void {
    this.#memosOf(table).set(name, value);
  }

  #memosOf(table: string): Map<string, unknown> {
    let m = this.#memos.get(table);
    if (!m) this.#memos.set(table, (m = new Map()));
    return m;
  }

  #wrote(table: string): void {
    if (table === "session") this.#row = null;
    else this.#memos.get(table)?.clear();
  }

  /**
   * The storage every session module uses: writes to `session` that bypass `set` drop the copy,
   * and a transaction that throws puts it back as it was.
   */
  wrap(storage: Storage): Storage {
    const raw = storage.sql;
    const sql = {
      exec: (query: string, ...bindings: unknown[]) => {
        if (this.#dirty && NAMES_SESSION.test(query)) this.#flush();
        const cursor = raw.exec(query, ...bindings);
        const w = WRITES.exec(query);
        if (w) this.#wrote(w[1]!.toLowerCase());
        return cursor;
      },
      get databaseSize() {
        return raw.databaseSize;
      },
    } as unknown as SqlStorage;
    return {
      sql,
      transactionSync: <T>(fn: () => T): T => {
        const before = { row: this.#row, dirty: this.#dirty };
        this.#depth++;
        try {
          return storage.transactionSync(() => {
            const v = fn();
            if (this.#depth === 1) this.#flush();
            return v;
          });
        } catch (e) {
          // Rolled back (to the savepoint, when nested): what this transaction set is undone.
          this.#row = before.row;
          this.#dirty = before.dirty;
          this.#memos.clear();
          throw e;
        } finally {
          this.#depth--;
        }
      },
    };
  }
}
