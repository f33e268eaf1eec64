-- TenantObject: the ordered index of one tenant's sessions for GET /sessions.
-- body is the Session JSON as of `version` (pushed by the SessionObject; older pushes are ignored).
CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  body TEXT NOT NULL
) WITHOUT ROWID;
