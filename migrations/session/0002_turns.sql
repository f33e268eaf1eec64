-- Turn execution: the runner link, native harness state and checkpoints.
-- lease: the current runner attachment (0 = never attached); link_state: none | requested | opening
-- | open. up_seq: last runner → object message applied under this lease; down_seq: last object →
-- runner message numbered. link_lost_at (ms): when the link dropped while work was pending.
ALTER TABLE session ADD COLUMN lease INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session ADD COLUMN link_state TEXT NOT NULL DEFAULT 'none';
ALTER TABLE session ADD COLUMN up_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session ADD COLUMN down_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session ADD COLUMN link_lost_at INTEGER;

-- link_out: object → runner messages of the current lease not yet acknowledged, resent after a
-- reconnect.
CREATE TABLE link_out (
  seq INTEGER PRIMARY KEY,
  body TEXT NOT NULL
);

-- native: the harness's native state, an append-only list of opaque JSON records.
CREATE TABLE native (
  seq INTEGER PRIMARY KEY,
  record TEXT NOT NULL,
  bytes INTEGER NOT NULL
);

-- checkpoints: one per completed turn. event_offset is the NDJSON history offset at that moment;
-- native_seq the last native record it includes.
CREATE TABLE checkpoints (
  id TEXT PRIMARY KEY,
  event_offset INTEGER NOT NULL,
  native_seq INTEGER NOT NULL,
  time TEXT NOT NULL
);

-- open_calls: tool calls recorded without a result yet (every tool.call gets exactly one).
CREATE TABLE open_calls (
  call_id TEXT PRIMARY KEY,
  input_id TEXT NOT NULL,
  dispatched INTEGER NOT NULL
);
