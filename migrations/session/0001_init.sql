-- SessionObject: one session per object.
-- session: the single metadata row. `version` grows on every change and orders the summaries
-- pushed to the tenant index; `indexed_version` is the last one the index acknowledged.
CREATE TABLE session (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  harness TEXT NOT NULL,
  config TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  descriptors TEXT NOT NULL,
  checkpoint TEXT,
  credential_bindings TEXT,
  cursor_key TEXT NOT NULL,
  epoch INTEGER NOT NULL DEFAULT 1,
  log_bytes INTEGER NOT NULL DEFAULT 0,
  version INTEGER NOT NULL DEFAULT 1,
  indexed_version INTEGER NOT NULL DEFAULT 0
);

-- events: retained events in log order. `seq` is the position cursors encode; `end_offset` is the
-- byte offset just past this event's line in the NDJSON history. Records larger than one SQLite
-- row allows keep `data` NULL and live in event_chunks.
CREATE TABLE events (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL,
  type TEXT NOT NULL,
  time TEXT NOT NULL,
  input_id TEXT,
  data TEXT,
  chunks INTEGER NOT NULL DEFAULT 0,
  bytes INTEGER NOT NULL,
  end_offset INTEGER NOT NULL
);

CREATE TABLE event_chunks (
  seq INTEGER NOT NULL,
  n INTEGER NOT NULL,
  part TEXT NOT NULL,
  PRIMARY KEY (seq, n)
) WITHOUT ROWID;

-- inputs: user.message inputs waiting for or running their turn, in arrival order.
CREATE TABLE inputs (
  seq INTEGER PRIMARY KEY,
  event_id TEXT NOT NULL,
  text TEXT NOT NULL,
  state TEXT NOT NULL,
  accepted_at TEXT NOT NULL,
  traceparent TEXT
);

-- idem_keys: idempotency keys of user.message and the event they recorded.
CREATE TABLE idem_keys (
  key TEXT PRIMARY KEY,
  input_hash TEXT NOT NULL,
  event_seq INTEGER NOT NULL
) WITHOUT ROWID;

-- credentials: private per-session overrides, AES-256-GCM ciphertext bound to tenant/session/alias.
CREATE TABLE credentials (
  alias TEXT PRIMARY KEY,
  key_id TEXT NOT NULL,
  iv TEXT NOT NULL,
  ciphertext TEXT NOT NULL
) WITHOUT ROWID;
