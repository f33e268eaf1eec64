/**
 * The split topology (the Worker alone, `svc runner` beside it) when a part stops without closing
 * its sockets: the Worker's process dies and its runner-host does not come back (docs/api.md
 * "Turns": a runner link that stays away longer than 10 s fails its running turn with
 * `service_error`; the object's new instance has no socket and never saw it close, so it must
 * notice the loss itself), or the runner-host freezes (it answers no ping: the pool drops it).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { SILENCE_CHECK_MS, SILENT_AFTER_MS } from "../../src/shared/runner-protocol.ts";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call } from "../helpers/api.ts";
import { startRunner, type RunnerProcess } from "../helpers/runner-process.ts";
import { openSse, type SseStream } from "../helpers/sse.ts";
import { secret, startStack, scriptedProviders, type Stack } from "../helpers/stack.ts";

const env = { MANAGE: secret("restart-manage"), OPENAI_KEY: "sk-restart", RUNNER_SECRET: secret("restart-runner") };
const runnerEnv = { RUNNER_SECRET: env.RUNNER_SECRET };

let provider: ScriptedProvider;
let root: string;
const started: { stop(): Promise<unknown> }[] = [];

const worker = (dir?: string) =>
  startStack({
    config: {
      tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
      harnesses: { pi: { command: ["node", "unused-by-the-worker.js"] } },
      providers: scriptedProviders(provider.url),
      runners: { token_env: "RUNNER_SECRET" },
    },
    env,
    runner: false,
    dir,
  });
const runner = (stack: Stack, name: string): Promise<RunnerProcess> =>
  startRunner({ dir: path.join(root, name), config: { public_url: stack.url, runners: { token_env: "RUNNER_SECRET" } }, env: runnerEnv });

/** The Worker alone with one runner-host, and a session whose turn hangs at the provider (running). */
async function hangingTurn(name: string): Promise<{ stack: Stack; r: RunnerProcess; id: string; sse: SseStream }> {
  const stack = await worker();
  started.push(stack);
  const r = await runner(stack, name);
  started.push(r);
  const body = { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } };
  const id = (await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body })).body.id as string;
  const sse = await openSse(`${stack.url}/sessions/${id}/events`, { token: env.MANAGE });
  await call(stack.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "[[hang]]" } });
  await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "running");
  return { stack, r, id, sse };
}

beforeAll(async () => {
  provider = await startScriptedProvider();
  root = mkdtempSync(path.join(tmpdir(), "svc-restart-"));
});
afterAll(async () => {
  for (const s of started.reverse()) await s.stop().catch(() => {});
  await provider?.close();
});

it("the Worker and its only runner-host killed mid-turn, the Worker restarted alone: the turn fails with service_error within the link's grace, and resume works with a new runner-host", { timeout: 90_000 }, async () => {
  const { stack: first, r: r1, id, sse } = await hangingTurn("r1");
  sse.close();
  await first.crash();
  await r1.stop("SIGKILL");

  const second = await worker(first.dir);
  started.push(second);
  const t0 = Date.now();
  const again = await openSse(`${second.url}/sessions/${id}/events`, { token: env.MANAGE });
  const failed = await again.waitFor((f) => f.event === "session.status" && f.json.data.status === "failed", 30_000);
  const ms = Date.now() - t0;
  expect(ms).toBeLessThan(25_000); // the 10 s grace, and the alarm's own lateness
  const error = again.frames.filter((f) => f.event === "session.error").at(-1)!.json;
  expect(error.data).toMatchObject({ code: "service_error", message: expect.stringMatching(/runner-host/) });
  expect(again.frames.indexOf(failed)).toBeGreaterThan(again.frames.indexOf(again.frames.find((f) => f.json?.id === error.id)!));

  // A new runner-host takes the resumed session.
  started.push(await runner(second, "r2"));
  expect((await call(second.url, "POST", `/sessions/${id}/resume`, { token: env.MANAGE, body: {} })).body.status).toBe("idle");
  const m = await call(second.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "after" } });
  await again.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === m.body.id, 30_000);
  again.close();
});

it("a runner-host that stops answering (SIGSTOP) is dropped after its silence bound: its running turn fails with service_error and readiness is 503; thawed, it dials in again and runs the resumed session", { timeout: 120_000 }, async () => {
  const { stack, r, id, sse } = await hangingTurn("frozen");
  process.kill(r.child.pid!, "SIGSTOP");
  const t0 = Date.now();
  try {
    await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "failed", SILENT_AFTER_MS + SILENCE_CHECK_MS + 25_000);
    expect(Date.now() - t0).toBeGreaterThan(SILENT_AFTER_MS - 25_000); // not before its pings could have been missed
    expect(sse.frames.filter((f) => f.event === "session.error").at(-1)!.json.data).toMatchObject({ code: "service_error", message: expect.stringMatching(/runner-host/) });
    expect((await call(stack.url, "GET", "/health/ready")).status).toBe(503);
  } finally {
    process.kill(r.child.pid!, "SIGCONT");
  }
  const from = r.mark();
  await r.waitFor(/"msg":"runner-host connected"/, 30_000, from);
  // (Readiness is cached for a second per isolate, so the thawed runner-host is proven by work.)
  expect((await call(stack.url, "POST", `/sessions/${id}/resume`, { token: env.MANAGE, body: {} })).body.status).toBe("idle");
  const m = await call(stack.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "thawed" } });
  await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === m.body.id, 30_000);
  sse.close();
});
