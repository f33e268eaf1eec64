-- Persistence: the upload state of this session (only used with `persistence` configured).
-- sync: one row. uploaded_offset: history bytes uploaded as blocks. inflight: JSON [{key,start,end}]
-- of the blocks being uploaded, recorded before their puts so a crash re-puts the same blocks.
-- dirty_at (ms): when local state got ahead of storage; NULL when everything is uploaded.
-- failures / retry_at (ms) / error: the backoff after a failed round. published: JSON
-- {checkpoint, native, offset, time} of the manifest `latest.json` holds; latest_stale: 1 when
-- latest.json must be rewritten. queued: 1 while the deployment's sync backlog counts this session.
CREATE TABLE sync (
  one INTEGER PRIMARY KEY CHECK (one = 1),
  uploaded_offset INTEGER NOT NULL DEFAULT 0,
  inflight TEXT,
  dirty_at INTEGER,
  failures INTEGER NOT NULL DEFAULT 0,
  retry_at INTEGER,
  error TEXT,
  published TEXT,
  latest_stale INTEGER NOT NULL DEFAULT 1,
  queued INTEGER NOT NULL DEFAULT 0
);

-- sync_blocks: uploaded history blocks in history order.
CREATE TABLE sync_blocks (
  start INTEGER PRIMARY KEY,
  end_offset INTEGER NOT NULL,
  key TEXT NOT NULL
);

-- checkpoints: native_key / native_records once the checkpoint's native records are uploaded;
-- published = 1 once its manifest is.
ALTER TABLE checkpoints ADD COLUMN native_key TEXT;
ALTER TABLE checkpoints ADD COLUMN native_records INTEGER;
ALTER TABLE checkpoints ADD COLUMN published INTEGER NOT NULL DEFAULT 0;

-- epoch_cuts: a restore cut the log at last_seq and moved to the next epoch; cursors of an older
-- epoch stay valid up to the smallest cut made since.
CREATE TABLE epoch_cuts (
  epoch INTEGER PRIMARY KEY,
  last_seq INTEGER NOT NULL
);

-- Blocks are cut by history offset: find the event that starts a block without a scan.
CREATE INDEX events_end_offset ON events (end_offset);
