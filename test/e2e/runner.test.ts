/**
 * The runner-host under stress on the real local stack: a dropped link mid-turn, key rotation,
 * a killed harness process, a lost runner-host, capacity limits, and shutdown.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call } from "../helpers/api.ts";
import { openSse, type SseStream } from "../helpers/sse.ts";
import { REFERENCE_HARNESSES, secret, sessionProcessPids, startStack, type Stack, oneTenantConfig } from "../helpers/stack.ts";

const env = { MANAGE: secret("runner-manage"), OPENAI_KEY: "sk-rotation-old" };
let provider: ScriptedProvider;

beforeAll(async () => {
  provider = await startScriptedProvider();
});
afterAll(async () => {
  await provider?.close();
});

const config = (limits: Record<string, number> = {}) => oneTenantConfig(provider.url, limits);

type S = { id: string; sse: SseStream };
async function session(stack: Stack): Promise<S> {
  const r = await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } });
  return { id: r.body.id, sse: await openSse(`${stack.url}/sessions/${r.body.id}/events`, { token: env.MANAGE }) };
}
async function say(stack: Stack, s: S, text: string): Promise<string> {
  const r = await call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: { type: "user.message", text } });
  expect(r.status).toBe(202);
  return r.body.id;
}
const statusFrame = (s: S, st: string) => s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === st);
async function log(stack: Stack, id: string) {
  const out: any[] = [];
  for (let after = ""; ; ) {
    const p = (await call(stack.url, "GET", `/sessions/${id}/events?limit=1000&after=${after}`, { token: env.MANAGE })).body;
    if (p.events.length === 0) return out;
    out.push(...p.events);
    after = p.next_cursor;
  }
}
const harnessPids = (stack: Stack) => sessionProcessPids(stack.stderr());

describe("link and keys", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ config: config(), env });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it("a dropped link socket mid-turn: the turn goes on, no event is lost or doubled", async () => {
    const s = await session(stack);
    const m = await say(stack, s, "[[deltas 60 size=2]] [[delay 40]]");
    await s.sse.waitFor((f) => f.event === "assistant.delta");
    const mark = stack.mark();
    // SIGHUP restarts the Worker runtime like a deploy: every socket drops, the runner-host redials.
    stack.child.kill("SIGHUP");
    await s.sse.ended;
    await stack.waitForLog(/"msg":"worker reloaded"/, 30_000, mark);
    const lastCursor = s.sse.frames.filter((f) => f.id).at(-1)!.id!;
    const again = await openSse(`${stack.url}/sessions/${s.id}/events`, { token: env.MANAGE, lastEventId: lastCursor });
    await again.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle", 30_000);
    const events = await log(stack, s.id);
    expect(events.map((e) => e.type)).toEqual(["user.message", "session.status", "assistant.message", "session.status"]);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    expect(events[2].data.text).toBe(Array.from({ length: 60 }, (_, i) => String.fromCharCode(97 + (i % 26)).repeat(2)).join(""));
    expect(events[3].input_id).toBe(m);
    const seen = [...s.sse.frames, ...again.frames].filter((f) => f.id).map((f) => f.json.id);
    expect(seen).toEqual(events.map((e) => e.id));
    again.close();
  });

  it("a rotated provider key recycles the idle harness process before the next turn", async () => {
    const s = await session(stack);
    const first = await say(stack, s, "before rotation");
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === first);
    const pidsBefore = harnessPids(stack);
    writeFileSync(path.join(stack.dir, "config.env"), "OPENAI_KEY=sk-rotation-new\n");
    const mark = stack.mark();
    stack.child.kill("SIGHUP");
    await stack.waitForLog(/"msg":"worker reloaded"/, 30_000, mark);
    const s2 = { id: s.id, sse: await openSse(`${stack.url}/sessions/${s.id}/events`, { token: env.MANAGE, lastEventId: s.sse.frames.filter((f) => f.id).at(-1)!.id }) };
    const second = await say(stack, s2, "after rotation");
    await s2.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === second, 30_000);
    const req = provider.requests.filter((r) => JSON.stringify(r.body).includes("after rotation")).at(-1)!;
    expect(req.headers.authorization).toBe("Bearer sk-rotation-new");
    // The first request that carried this text is the first turn's (later ones repeat it as history).
    const old = provider.requests.find((r) => JSON.stringify(r.body).includes("before rotation"))!;
    expect(old.headers.authorization).toBe("Bearer sk-rotation-old");
    // The old key came from svc's environment, which a start would have kept over the file: said.
    const replaced = stack.stderr().slice(mark).split("\n").find((l) => l.includes("the env file replaced variables"));
    expect(JSON.parse(replaced!)).toMatchObject({ level: "warn", variables: "OPENAI_KEY" });
    expect(replaced).not.toContain("sk-rotation");
    const pidsAfter = harnessPids(stack);
    expect(pidsAfter.length).toBeGreaterThan(pidsBefore.length);
    expect(pidsBefore).not.toContain(pidsAfter.at(-1));
    s2.sse.close();
  });

  it("a SIGHUP whose env file would not start (a token under 24 bytes) is refused whole: the running environment stays", async () => {
    const envFile = path.join(stack.dir, "config.env");
    writeFileSync(envFile, "OPENAI_KEY=sk-rotation-new\nMANAGE=short\n");
    const mark = stack.mark();
    stack.child.kill("SIGHUP");
    const refused = JSON.parse(await stack.waitForLog(/"msg":"reload refused/, 30_000, mark)) as { problems: string };
    expect(refused.problems).toMatch(/MANAGE/);
    expect(refused.problems).not.toContain("short");
    expect((await call(stack.url, "GET", "/sessions", { token: env.MANAGE })).status).toBe(200);
    expect((await call(stack.url, "GET", "/sessions", { token: "short" })).status).toBe(401);
    expect(stack.stderr().slice(mark)).not.toMatch(/"msg":"worker reloaded"/);
    // The rotation above took OPENAI_KEY from the file: a file that no longer sets it leaves it
    // unset, which the provider needs, so that reload is refused too (not silently kept).
    writeFileSync(envFile, "");
    const again = stack.mark();
    stack.child.kill("SIGHUP");
    const second = JSON.parse(await stack.waitForLog(/"msg":"reload refused/, 30_000, again)) as { problems: string };
    expect(second.problems).toContain("providers.openai.api_key_env: environment variable OPENAI_KEY is not set");
    // An env file that cannot be read (here a directory in its place) is refused the same way, not a crash.
    rmSync(envFile);
    mkdirSync(envFile);
    const third = stack.mark();
    stack.child.kill("SIGHUP");
    const unreadable = JSON.parse(await stack.waitForLog(/"msg":"reload refused/, 30_000, third)) as { msg: string; error: string };
    expect(unreadable).toMatchObject({ msg: "reload refused: the environment file cannot be read; nothing changed", error: `${envFile}: the environment file cannot be read (not a regular file)` });
    expect((await call(stack.url, "GET", "/health/live")).status).toBe(200);
    rmSync(envFile, { recursive: true });
    writeFileSync(envFile, "OPENAI_KEY=sk-rotation-new\n");
  });

  it("kill -9 of a harness process mid-turn fails the turn with service_error", async () => {
    const s = await session(stack);
    const m = await say(stack, s, "[[hang]]");
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "running");
    await provider.waitForRequests(provider.requests.length);
    const pid = harnessPids(stack).at(-1)!;
    process.kill(pid, "SIGKILL");
    await statusFrame(s, "failed");
    const err = s.sse.frames.find((f) => f.event === "session.error")!.json;
    expect(err).toMatchObject({ input_id: m, data: { code: "service_error" } });
    expect(err.data.message).toMatch(/harness/);
    // Resume and the session works again, in a new harness process.
    await call(stack.url, "POST", `/sessions/${s.id}/resume`, { token: env.MANAGE });
    const n = await say(stack, s, "alive again");
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === n, 30_000);
    s.sse.close();
  });
});

describe("capacity", () => {
  it("limits.active: a new turn waits while the only slot runs, and starts when it frees", async () => {
    const stack = await startStack({ config: config({ active: 1, loaded: 4 }), env });
    try {
      const a = await session(stack);
      const b = await session(stack);
      await say(stack, a, "[[hang]]");
      await statusFrame(a, "running");
      const bm = await say(stack, b, "waiting for a slot");
      // B waits: nothing runs for it while A holds the only slot. A's interrupt frees the slot.
      expect(b.sse.frames.filter((f) => f.event === "session.status")).toHaveLength(0);
      await call(stack.url, "POST", `/sessions/${a.id}/events`, { token: env.MANAGE, body: { type: "user.interrupt" } });
      const interruptedAt = Date.parse((await statusFrame(a, "interrupted")).json.time);
      const idle = await b.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === bm, 30_000);
      const running = b.sse.frames.find((f) => f.event === "session.status" && f.json.data.status === "running")!;
      expect(Date.parse(running.json.time)).toBeGreaterThanOrEqual(interruptedAt);
      expect(idle).toBeDefined();
      a.sse.close();
      b.sse.close();
    } finally {
      await stack.stop();
    }
  });

  it("limits.loaded at its edge: with nothing idle every new session's message gets 429; with one idle, of messages racing for it one is accepted and runs", async () => {
    const stack = await startStack({ config: config({ active: 1, loaded: 1 }), env });
    try {
      const a = await session(stack);
      await say(stack, a, "[[hang]]");
      await statusFrame(a, "running");
      const fresh = async () => (await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } })).body.id as string;
      const send = (id: string) => call(stack.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "hi" } });
      const busy = await Promise.all([await fresh(), await fresh(), await fresh()].map(send));
      expect(busy.map((r) => [r.status, r.body.error?.code])).toEqual(Array(3).fill([429, "overloaded"]));
      await call(stack.url, "POST", `/sessions/${a.id}/events`, { token: env.MANAGE, body: { type: "user.interrupt" } });
      await statusFrame(a, "interrupted");
      // A is loaded and idle now (its turn ended): room for exactly one more.
      const ids = [await fresh(), await fresh(), await fresh()];
      const racing = await Promise.all(ids.map(send));
      expect(racing.map((r) => r.status).sort()).toEqual([202, 429, 429]);
      const accepted = ids[racing.findIndex((r) => r.status === 202)]!;
      const sse = await openSse(`${stack.url}/sessions/${accepted}/events`, { token: env.MANAGE });
      await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle", 30_000);
      sse.close();
      a.sse.close();
    } finally {
      await stack.stop();
    }
  });

  it("limits.loaded with several sessions idle: new sessions' messages racing for them are all accepted, each dropping one", async () => {
    const stack = await startStack({ config: config({ active: 2, loaded: 4 }), env });
    try {
      // Four loaded sessions whose turns end one after another (two slots): all idle at the limit.
      const first = await Promise.all([1, 2, 3, 4].map(() => session(stack)));
      const inputs = await Promise.all(first.map((s, i) => say(stack, s, `[[deltas 4]] [[delay ${10 * (i + 1)}]]`)));
      await Promise.all(first.map((s, i) => s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === inputs[i], 30_000)));
      const next = await Promise.all([1, 2, 3, 4].map(() => session(stack)));
      const racing = await Promise.all(next.map((s) => call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "hi" } })));
      expect(racing.map((r) => r.status)).toEqual([202, 202, 202, 202]);
      await Promise.all(next.map((s) => s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle", 30_000)));
      for (const s of [...first, ...next]) s.sse.close();
    } finally {
      await stack.stop();
    }
  });
});

describe("runner-host lost and shutdown", () => {
  it("a runner-host lost mid-turn (the stack crashes and restarts): the turn fails with a clear message", async () => {
    let stack = await startStack({ config: config(), env });
    const s = await session(stack);
    const m = await say(stack, s, "[[hang]]");
    await statusFrame(s, "running");
    await stack.crash();
    stack = await startStack({ config: config(), env, dir: stack.dir });
    try {
      const again = await openSse(`${stack.url}/sessions/${s.id}/events`, { token: env.MANAGE });
      await again.waitFor((f) => f.event === "session.status" && f.json.data.status === "failed", 30_000);
      const err = again.frames.find((f) => f.event === "session.error")!.json;
      expect(err).toMatchObject({ input_id: m, data: { code: "service_error" } });
      expect(err.data.message).toMatch(/runner-host/);
      again.close();
    } finally {
      await stack.stop();
    }
  });

  it("SIGTERM interrupts running turns, ends open streams, and exits within about 20 seconds", async () => {
    const stack = await startStack({ config: config(), env });
    const s = await session(stack);
    const idle = (await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } })).body.id;
    // Mid-reply: one delta out, the next one a minute away.
    const mid = { type: "user.message", text: "[[deltas 3]] [[delay 60000]]", key: "k-mid" };
    const sent = await call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: mid });
    expect(sent.status).toBe(202);
    const m = sent.body.id as string;
    await statusFrame(s, "running");
    await s.sse.waitFor((f) => f.event === "assistant.delta");
    const stopped = stack.stop("SIGTERM");
    // The running turn is interrupted only after the Worker was told: from then on new work is
    // refused at once, not when the fleet snapshot next sees the runner-host draining.
    await s.sse.waitFor((f) => f.event === "session.error");
    const refused = await Promise.all([
      call(stack.url, "POST", `/sessions/${idle}/events`, { token: env.MANAGE, body: { type: "user.message", text: "too late" } }),
      call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } }),
      call(stack.url, "GET", "/health/ready", {}),
      // A repeated key is not new work: its original event, as at any other time.
      call(stack.url, "POST", `/sessions/${s.id}/events`, { token: env.MANAGE, body: mid }),
    ]);
    expect(refused.map((r) => [r.status, r.body.error?.code ?? r.body.status ?? r.body.id])).toEqual([
      [429, "overloaded"],
      [429, "overloaded"],
      [503, "not_ready"],
      [202, m],
    ]);
    await s.sse.ended;
    const { code, ms } = await stopped;
    expect(code).toBe(0);
    expect(ms).toBeLessThan(20_000);
    // As for an interrupt: the reply the stop cut off is not recorded (no `assistant.message`).
    const turn = s.sse.frames.slice(s.sse.frames.findIndex((f) => f.event === "session.status" && f.json.data.status === "running"));
    expect(turn.map((f) => [f.event, f.json.data.code ?? f.json.data.status ?? f.json.data.text, f.json.input_id])).toEqual([
      ["session.status", "running", m],
      ["assistant.delta", "aaaa", m],
      ["session.error", "conflict", m],
      ["session.status", "interrupted", undefined],
    ]);
    // The stream was ended by the service after those frames, not cut by the runtime stopping.
    const ended = stack.stderr().split("\n").filter((l) => l.includes('"msg":"event streams ended"')).map((l) => JSON.parse(l));
    expect(ended).toMatchObject([{ ended: 1, cut: 0 }]);
    // The whole stack stops, so the Worker was also asked to end input still waiting for a
    // runner-host (none here; test/worker/shutdown-waiting.test.ts has one).
    expect(stack.stderr()).toMatch(/"msg":"sessions waiting for a runner-host interrupted","sessions":0/);
  });

  it("SIGTERM right after a SIGHUP waits for the reload, then drains: new work is refused, not run after a restart", async () => {
    const stack = await startStack({ config: config(), env });
    const mark = stack.mark();
    stack.child.kill("SIGHUP");
    await stack.waitForLog(/"msg":"reloading"/, 30_000, mark); // the runtime is restarting now
    expect((await stack.stop("SIGTERM")).code).toBe(0);
    const log = stack.stderr().slice(mark);
    expect(log).toMatch(/"msg":"worker reloaded"[^]*"msg":"shutting down: new work is refused"/);
    expect(log).not.toContain("could not tell the worker to refuse new work");
  });

  it("SIGTERM interrupts input still queued for a harness process too: conflict before execution, and it does not run after the restart", async () => {
    // One harness process for one session: Y's message waits for the process X's hung turn holds.
    const single = { ...config(), harnesses: { pi: { ...REFERENCE_HARNESSES.pi, max_hosts: 1, max_shared: 1, spares: 0 } } };
    let stack = await startStack({ config: single, env });
    const x = await session(stack);
    const y = await session(stack);
    await say(stack, x, "[[hang]]");
    await statusFrame(x, "running");
    const queued = await say(stack, y, "queued behind the only process");
    const { code } = await stack.stop("SIGTERM");
    expect(code).toBe(0);
    await y.sse.ended;
    expect(y.sse.frames.filter((f) => f.event !== "session.status" || f.json.data.status !== "idle").map((f) => [f.event, f.json.data.code ?? f.json.data.status, f.json.input_id])).toEqual([
      ["user.message", undefined, undefined],
      ["session.error", "conflict", queued],
      ["session.status", "interrupted", undefined],
    ]);
    expect(y.sse.frames.find((f) => f.event === "session.error")!.json.data.message).toMatch(/^the queued input was interrupted before execution: /);

    stack = await startStack({ config: single, env, dir: stack.dir });
    try {
      // After the restart nothing runs until a resume: the log is what it was at the shutdown.
      const before = y.sse.frames.filter((f) => f.json.cursor).map((f) => f.json.id);
      expect((await call(stack.url, "GET", `/sessions/${y.id}`, { token: env.MANAGE })).body.status).toBe("interrupted");
      expect((await log(stack, y.id)).map((e) => e.id)).toEqual(before);
    } finally {
      await stack.stop();
    }
  });
});
