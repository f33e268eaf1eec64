-- sync_orphans: storage objects a restore cut off (later checkpoints, their native records, the
-- blocks of the cut tail). They are deleted only after latest.json names the restored checkpoint:
-- until then it may still name them, and a load from it needs them.
CREATE TABLE sync_orphans (
  key TEXT PRIMARY KEY
) WITHOUT ROWID;
