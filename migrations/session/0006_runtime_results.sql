-- runtime_calls.result: the executor's result as passed to the runner-host (JSON), kept until the
-- call's tool.result is recorded. When work ends (interrupt, close, shutdown, a lost runner-host)
-- between an accepted reply and the runner-host's tool_result, this is the result recorded: the
-- executor was told its reply was accepted.
ALTER TABLE runtime_calls ADD COLUMN result TEXT;
