/**
 * The session row (`SELECT * FROM session`), held in memory between the steps of one object
 * instance instead of being read again at every step.
 *
 * Lifecycle: SQLite stays the only truth. A new object instance (first request, after eviction or
 * a restart) starts with nothing cached and reads the row on first use. Writes keep the copy equal
 * to the table:
 * - `SessionState.set` writes named columns and patches the copy with the same values;
 * - any other statement that writes the `session` table through the wrapped storage (importer,
 *   lease renewal, rebind) drops the copy, so the next read goes to SQLite;
 * - a transaction that throws (and so rolls back) drops the copy, which may hold a value the
 *   rollback undid.
 * A patch replaces the cached object instead of changing it, so a caller holding an earlier row
 * (e.g. the version an index push is about) keeps that snapshot.
 *
 * The copy is shared by every SessionState over the same SQL handle (keyed by it), so a second
 * SessionState built over the object's storage (tests, tools) sees and keeps the same row.
 */
import type { SessionRow } from "./record.ts";

export type Storage = Pick<DurableObjectStorage, "sql" | "transactionSync">;

/** Statements that change the `session` table: they make the cached copy stale. */
const WRITES_SESSION = /^\s*(?:UPDATE|INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|DELETE\s+FROM)\s+session\b/i;

const caches = new WeakMap<SqlStorage, RowCache>();

export class RowCache {
  /** `null`: not read since the last drop; `undefined`: read, and there is no session row. */
  #row: SessionRow | undefined | null = null;
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

  /** Writes `fields` to the row and to the copy. Columns come from the row type, never from input. */
  set(fields: Partial<SessionRow>): void {
    const keys = Object.keys(fields) as (keyof SessionRow)[];
    this.#sql.exec(`UPDATE session SET ${keys.map((k) => `${k} = ?`).join(", ")}`, ...keys.map((k) => fields[k] ?? null));
    if (this.#row) this.#row = { ...this.#row, ...fields };
  }

  drop(): void {
    this.#row = null;
  }

  /**
   * The storage every session module uses: writes to `session` that bypass `set` drop the copy,
   * and so does a transaction that throws.
   */
  wrap(storage: Storage): Storage {
    const raw = storage.sql;
    const sql = {
      exec: (query: string, ...bindings: unknown[]) => {
        const cursor = raw.exec(query, ...bindings);
        if (WRITES_SESSION.test(query)) this.drop();
        return cursor;
      },
      get databaseSize() {
        return raw.databaseSize;
      },
    } as unknown as SqlStorage;
    return {
      sql,
      transactionSync: <T>(fn: () => T): T => {
        try {
          return storage.transactionSync(fn);
        } catch (e) {
          this.drop();
          throw e;
        }
      },
    };
  }
}
