/** What migrations need of an object's storage. */
export type SqlStorage = Pick<DurableObjectStorage, "sql" | "transactionSync">;

/**
 * Numbered SQL migrations for object SQLite. Applied synchronously when an object wakes, each in
 * one transaction with its version row. DO SQLite refuses `PRAGMA user_version`, hence the table.
 * Append only: a migration's index + 1 is its version.
 */
export function migrate(storage: SqlStorage, migrations: readonly string[]): void {
  const sql = storage.sql;
  sql.exec("CREATE TABLE IF NOT EXISTS _migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)");
  const row = sql.exec<{ v: number | null }>("SELECT MAX(version) AS v FROM _migrations").one();
  for (let v = (row.v ?? 0) + 1; v <= migrations.length; v++) {
    storage.transactionSync(() => {
      sql.exec(migrations[v - 1]!);
      sql.exec("INSERT INTO _migrations (version, applied_at) VALUES (?, ?)", v, new Date().toISOString());
    });
  }
}

/**
 * Whether the object's database already holds a schema (any migration applied). Reading
 * `sqlite_master` writes nothing, so an object addressed by an unknown name can answer `404` and
 * stay empty instead of persisting tables for a name that names nothing.
 */
export function hasSchema(storage: Pick<DurableObjectStorage, "sql">): boolean {
  return storage.sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'").toArray().length > 0;
}
