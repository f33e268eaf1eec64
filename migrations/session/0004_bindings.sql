-- Bindings and runtime tools.
-- session.bindings: the session's tool bindings as resolved at create (JSON array of
-- {alias, tools, executor?, runtime?, parameters?}); `executor` changes when an executor is rebound.
ALTER TABLE session ADD COLUMN bindings TEXT NOT NULL DEFAULT '[]';
-- open_calls.tool: the tool's name, to find its binding (credential, executor).
ALTER TABLE open_calls ADD COLUMN tool TEXT;
-- runtime_calls: open calls dispatched to an executor. replied: the executor's result was passed
-- to the runner-host (a second one is refused).
CREATE TABLE runtime_calls (
  call_id TEXT PRIMARY KEY,
  executor TEXT NOT NULL,
  replied INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
