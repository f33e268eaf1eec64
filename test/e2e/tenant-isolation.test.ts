/**
 * One tenant cannot hurt another through the runner-host: a harness process holds sessions of one
 * tenant only, so tenant A's crashed harness leaves tenant B's running turn alone.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call } from "../helpers/api.ts";
import { openSse, type SseStream } from "../helpers/sse.ts";
import { secret, sessionProcessPids, type Stack, startScriptedStack, type ScriptedStack } from "../helpers/stack.ts";

const env = { TENANT_A: secret("tenant-a"), TENANT_B: secret("tenant-b"), OPENAI_KEY: "sk-isolation-key" };
let rig: ScriptedStack;
let provider: ScriptedProvider;
let stack: Stack;

beforeAll(async () => {
  rig = await startScriptedStack({
    config: {
      tokens: [
        { token_env: "TENANT_A", tenant: "a", manage: true },
        { token_env: "TENANT_B", tenant: "b", manage: true },
      ],
    },
    env,
  });
  ({ provider, stack } = rig);
});
afterAll(() => rig?.stop());

type S = { id: string; token: string; sse: SseStream };
/**
 * The streams resume: a 1.5 MB answer and its deltas waiting for a test process busy on the
 * provider's side (parsing a ~9 MB request) can pass `subscriber_bytes` (2 MiB), which cuts the
 * stream as specified; a client reconnects with its last cursor.
 */
async function session(token: string): Promise<S> {
  const r = await call(stack.url, "POST", "/sessions", { token, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } });
  expect(r.status).toBe(201);
  return { id: r.body.id, token, sse: await openSse(`${stack.url}/sessions/${r.body.id}/events`, { token, resume: true }) };
}
async function say(s: S, text: string): Promise<string> {
  const r = await call(stack.url, "POST", `/sessions/${s.id}/events`, { token: s.token, body: { type: "user.message", text } });
  expect(r.status).toBe(202);
  return r.body.id;
}
const status = (s: S, st: string, input?: string, ms = 30_000) =>
  s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === st && (input === undefined || f.json.input_id === input), ms);
/**
 * Waits of the 8 MiB test, ms: each of its turns moves megabytes through every process of the
 * stack (a 1.5 MB answer, then a ~9 MB history to the harness and to the provider), 9–12 s in all
 * alone but once over 30 s for one step beside the other test files on two CPUs.
 */
const BIG_STEP_MS = 60_000;
const startedPids = (from: number) => sessionProcessPids(stack.stderr().slice(from));

describe("a harness process never holds sessions of two tenants", () => {
  it("tenant A's harness crash does not fail tenant B's running turn", async () => {
    const mark = stack.mark();
    const a = await session(env.TENANT_A);
    const b = await session(env.TENANT_B);
    const am = await say(a, "[[hang]]");
    await status(a, "running");
    await stack.waitForLog(/"msg":"harness process started"/, 30_000, mark);
    const [pidA] = startedPids(mark);
    // B's turn streams for a few seconds; A's process dies in the middle of it.
    const bm = await say(b, "[[deltas 40 size=2]] [[delay 100]]");
    await b.sse.waitFor((f) => f.event === "assistant.delta", 30_000);
    const pids = startedPids(mark);
    expect(pids).toHaveLength(2); // one process per tenant, although max_shared (8) had room
    process.kill(pidA!, "SIGKILL");
    await status(a, "failed");
    expect(a.sse.frames.find((f) => f.event === "session.error")!.json).toMatchObject({ input_id: am, data: { code: "service_error" } });

    await status(b, "idle", bm);
    expect(b.sse.frames.some((f) => f.event === "session.error")).toBe(false);
    const message = b.sse.frames.find((f) => f.event === "assistant.message")!.json.data.text;
    expect(message).toBe(Array.from({ length: 40 }, (_, i) => String.fromCharCode(97 + (i % 26)).repeat(2)).join(""));
    a.sse.close();
    b.sse.close();
  });

  it("tenant A's native state past 8 MiB reaches its harness in pieces on reopen; tenant B's running turn goes on", async () => {
    const a = await session(env.TENANT_A);
    const b = await session(env.TENANT_B);
    // Six answers of 1.5 MB each: about 9 MB of native state, more than one 8 MiB harness line.
    for (let i = 0; i < 6; i++) {
      const m = await say(a, `big-${i} [[deltas 15 size=100000]]`);
      await status(a, "idle", m, BIG_STEP_MS);
    }
    const failing = await say(a, "[[error 500]]");
    await status(a, "interrupted");
    expect(a.sse.frames.find((f) => f.event === "session.error" && f.json.input_id === failing)!.json.data.code).toBe("provider_error");
    expect((await call(stack.url, "POST", `/sessions/${a.id}/resume`, { token: a.token })).status).toBe(200);

    const bm = await say(b, "[[deltas 40 size=2]] [[delay 100]]");
    await b.sse.waitFor((f) => f.event === "assistant.delta", 30_000);
    const am = await say(a, "after-reopen-marker");
    await status(a, "idle", am, BIG_STEP_MS);
    await status(b, "idle", bm, BIG_STEP_MS);
    expect(b.sse.frames.some((f) => f.event === "session.error")).toBe(false);
    // The reopened harness had the whole history: the provider saw all six large answers.
    const req = provider.requests.findLast((r) => JSON.stringify(r.body.messages).includes("after-reopen-marker"))!;
    const history = req.body.messages.filter((m: { role: string; content: unknown }) => m.role === "assistant" && JSON.stringify(m.content).length > 1_000_000);
    expect(history).toHaveLength(6);
    a.sse.close();
    b.sse.close();
  }, 8 * BIG_STEP_MS);
});
