-- mirrored: the version last written to the PostgreSQL mirror (persistence.postgres_env); rows
-- with mirrored < version are written by the next mirror alarm.
ALTER TABLE sessions ADD COLUMN mirrored INTEGER NOT NULL DEFAULT 0;

-- tenant: this object's tenant name (what the mirror rows are keyed by).
CREATE TABLE tenant (
  name TEXT PRIMARY KEY
) WITHOUT ROWID;
