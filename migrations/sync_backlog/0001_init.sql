-- SyncBacklog: one per deployment. queued: sessions (object names) with local state not yet in
-- external storage; `since` (ms) is when each joined.
CREATE TABLE queued (
  name TEXT PRIMARY KEY,
  since INTEGER NOT NULL
) WITHOUT ROWID;
