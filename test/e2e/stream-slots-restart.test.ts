/**
 * Shutdown (docs/api.md "Shutdown and readiness") and `limits.subscribers`: a shutdown ends every open SSE stream — an
 * executor's command stream as well as session event streams — and gives their slots back, so the
 * next start on the same data_dir opens as many streams as the limit allows at once.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect, it } from "vitest";
import { call } from "../helpers/api.ts";
import { registerExecutor, sseExecutor } from "../helpers/executors.ts";
import { openSse } from "../helpers/sse.ts";
import { ROOT, secret, startStack } from "../helpers/stack.ts";

const env = { MANAGE: secret("slots-manage"), OPENAI_KEY: "sk-slots" };
const config = {
  tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
  harnesses: { env: { command: ["node", `${ROOT}test/fixtures/env-harness.mjs`] } },
  providers: { openai: { api_key_env: "OPENAI_KEY" } },
  limits: { subscribers: 4 },
};
const LOOKUP = { name: "lookup", description: "looks a word up", input_schema: { type: "object" } };

it("streams open at a shutdown, an executor's command stream among them, hold no slot after the restart", { timeout: 90_000 }, async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "svc-slots-"));
  const newSession = async (url: string) =>
    (await call(url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "env", config: { model: "openai/gpt-4o-mini", tools: [] } } })).body.id as string;

  const first = await startStack({ config, env, dataDir });
  const sessions: string[] = [];
  try {
    const executor = (await registerExecutor(first.url, env.MANAGE, { binding: "dict", tools: [LOOKUP] })).body;
    const commands = await sseExecutor(first.url, executor);
    for (let i = 0; i < 3; i++) sessions.push(await newSession(first.url));
    const streams = await Promise.all(sessions.map((id) => openSse(`${first.url}/sessions/${id}/events`, { token: env.MANAGE })));
    expect(streams.map((s) => s.status)).toEqual([200, 200, 200]);
    // All four slots are taken.
    const full = await call(first.url, "GET", `/sessions/${sessions[0]}/events`, { token: env.MANAGE, headers: { Accept: "text/event-stream" } });
    expect(full.status).toBe(429);
    await first.stop();
    await Promise.all([commands.ended, ...streams.map((s) => s.ended)]);
  } finally {
    await first.stop();
  }

  const second = await startStack({ config, env, dataDir });
  try {
    const reopened = await Promise.all([...sessions, await newSession(second.url)].map((id) => openSse(`${second.url}/sessions/${id}/events`, { token: env.MANAGE })));
    expect(reopened.map((s) => s.status)).toEqual([200, 200, 200, 200]);
    for (const s of reopened) s.close();
  } finally {
    await second.stop();
  }
});
