-- StreamGate: SSE stream slots (limits.subscribers) held by Worker isolates, per tenant.
-- A row is one isolate's holding for one tenant: the streams it has open plus a little headroom.
-- expires_at (ms since epoch) is pushed forward by every sync of that isolate; a row past it
-- belongs to an isolate that went away and no longer counts.
CREATE TABLE holdings (
  holder TEXT NOT NULL,
  tenant TEXT NOT NULL,
  slots INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (holder, tenant)
) WITHOUT ROWID;

-- holders: the last sync applied per isolate. Syncs carry a sequence number that rises with each
-- one an isolate sends; one overtaken by a later sync (they run concurrently) changes nothing.
CREATE TABLE holders (
  holder TEXT PRIMARY KEY,
  seq INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;
