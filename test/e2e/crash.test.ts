/**
 * Crash safety (issue "data path" 5): SIGKILL the whole local stack while events are appended and
 * streamed, restart it on the same data_dir: every event a client received is in the log in the
 * same order with the same cursor, and a reconnect with the last cursor continues without a gap or
 * a duplicate.
 */
import { expect, it } from "vitest";
import { call } from "../helpers/api.ts";
import { openSse } from "../helpers/sse.ts";
import { REFERENCE_HARNESS_COMMAND, secret, startStack } from "../helpers/stack.ts";

const env = { MANAGE: secret("crash-manage"), KEY: "sk-x" };
const config = {
  tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
  harnesses: { pi: { command: REFERENCE_HARNESS_COMMAND } },
  providers: { openai: { api_key_env: "KEY" } },
  limits: { queue: 1024 },
};

it("events a client received survive a SIGKILL of the stack, in order, with the same cursors", async () => {
  let stack = await startStack({ config, env, runner: false });
  const id = (await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } })).body.id;
  const sse = await openSse(`${stack.url}/sessions/${id}/events`, { token: env.MANAGE });

  // Writers keep appending while the stream is read; the crash lands in the middle of it.
  let stop = false;
  const writers = [0, 1, 2].map(async (w) => {
    for (let i = 0; !stop; i++) {
      await call(stack.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text: `w${w}-${i}` } }).catch(() => {});
    }
  });
  await sse.waitFrames(60);
  await stack.crash();
  stop = true;
  await Promise.all(writers);
  await sse.ended;
  const received = sse.frames.map((f) => ({ id: f.json.id, cursor: f.id }));
  expect(received.length).toBeGreaterThanOrEqual(60);

  stack = await startStack({ config, env, dir: stack.dir, runner: false });
  try {
    const log: { id: string; cursor: string }[] = [];
    for (let after = ""; ; ) {
      const p = (await call(stack.url, "GET", `/sessions/${id}/events?limit=1000&after=${after}`, { token: env.MANAGE })).body;
      if (p.events.length === 0) break;
      log.push(...p.events.map((e: { id: string; cursor: string }) => ({ id: e.id, cursor: e.cursor })));
      after = p.next_cursor;
    }
    // Everything received is in the log, as a prefix, with the same cursors.
    expect(log.slice(0, received.length)).toEqual(received);

    const last = received.at(-1)!.cursor;
    const resumed = await openSse(`${stack.url}/sessions/${id}/events`, { token: env.MANAGE, lastEventId: last });
    const rest = log.length - received.length;
    if (rest > 0) await resumed.waitFrames(rest);
    const more = (await call(stack.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "after restart" } })).body;
    await resumed.waitFrames(rest + 1);
    expect(resumed.frames.map((f) => f.json.id)).toEqual([...log.slice(received.length).map((e) => e.id), more.id]);
    resumed.close();
  } finally {
    await stack.stop();
  }
});
