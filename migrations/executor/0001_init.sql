-- ExecutorObject: one executor per object (object name = executor id).
-- executor: the registration. token_digest is the SHA-256 of the executor token (the token itself
-- is never stored). state: open | closed. connection: the current connection identity (NULL until
-- the first connect); a reply naming any other connection is stale.
CREATE TABLE executor (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  binding TEXT NOT NULL,
  tools TEXT NOT NULL,
  token_digest TEXT NOT NULL,
  state TEXT NOT NULL,
  connection TEXT,
  created_at TEXT NOT NULL
);

-- pending: calls sent to the executor and not yet answered back to their session. state:
-- dispatched (waiting for the executor's result) | answering (a result is on its way to the
-- session) | lost (the connection dropped or the executor closed; `result` is the unknown-outcome
-- error still to be delivered). session: the SessionObject name to answer.
CREATE TABLE pending (
  call_id TEXT PRIMARY KEY,
  connection TEXT NOT NULL,
  session TEXT NOT NULL,
  state TEXT NOT NULL,
  result TEXT
) WITHOUT ROWID;
