-- RunnerPool: where sessions are placed.
-- assignments: the runner-host (and its boot) each session was last placed on, so a runner-host
-- that comes back with a new boot (it restarted; its sessions are gone) can be reported.
CREATE TABLE assignments (
  session TEXT PRIMARY KEY,
  runner_id TEXT NOT NULL,
  boot TEXT NOT NULL,
  lease INTEGER NOT NULL,
  harness TEXT NOT NULL
) WITHOUT ROWID;

-- waiting: sessions with work and no runner-host able to take them yet, oldest first.
CREATE TABLE waiting (
  session TEXT PRIMARY KEY,
  lease INTEGER NOT NULL,
  harness TEXT NOT NULL,
  since INTEGER NOT NULL
) WITHOUT ROWID;

-- boots: the last boot id seen per runner id.
CREATE TABLE boots (
  runner_id TEXT PRIMARY KEY,
  boot TEXT NOT NULL
) WITHOUT ROWID;
