-- ended_calls: tool calls whose result is recorded. An inspection token stops working once its call
-- is here; until then a validly signed token works, even before the object has seen the call
-- (the tool may call back faster than the runner link delivers `tool_call`).
CREATE TABLE ended_calls (
  call_id TEXT PRIMARY KEY
) WITHOUT ROWID;
