-- runtime_calls.tool: the runtime tool's name, so the executor's result is checked against its
-- descriptor (output_schema, the result limit) as the reply is accepted; the result kept in
-- runtime_calls.result is then already the checked one. Calls dispatched before this migration
-- have NULL here: their results are checked by the runner-host only.
ALTER TABLE runtime_calls ADD COLUMN tool TEXT;
