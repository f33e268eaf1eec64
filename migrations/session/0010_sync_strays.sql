-- sync_strays: objects a load found in the session's folder that no stored manifest named (history
-- stored past latest.json's checkpoint, native objects without a manifest; src/persistence/strays.ts).
-- Not deleted at the load: a deployment that still holds the session may go on to name them. Once
-- this session has written latest.json itself they become sync_orphans, those that no stored
-- manifest names by then.
CREATE TABLE sync_strays (
  key TEXT PRIMARY KEY
) WITHOUT ROWID;
