/**
 * Regions and scale-out on the real local stack: the Worker alone (`-no-runner`) and three
 * separate `svc runner` processes in two regions, each with a runner configuration that holds the
 * runner secret and nothing of the tenants or providers. Placement in a session's home region,
 * failover when every runner-host of that region leaves, and the runner-host's operational
 * behaviour: status file, one runner-host per data_dir, loud refusals, exit after a bounded run.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call } from "../helpers/api.ts";
import { startRunner, type RunnerProcess } from "../helpers/runner-process.ts";
import { openSse } from "../helpers/sse.ts";
import { secret, startStack, type Stack, scriptedProviders } from "../helpers/stack.ts";
import { runSvc } from "../helpers/svc-command.ts";
import { MAX_REFUSALS } from "../../runner-host/cli/runner-command.ts";

const env = { MANAGE: secret("regions-manage"), OPENAI_KEY: "sk-regions", RUNNER_SECRET: secret("regions-runner") };
const runnerEnv = { RUNNER_SECRET: env.RUNNER_SECRET };

let provider: ScriptedProvider;
let stack: Stack;
let root: string;
const runners: Record<string, RunnerProcess> = {};

/** A runner configuration for `region`, dialling the stack; `loaded` sets the room it offers. */
const runnerConfig = (region: string, loaded: number) => ({
  public_url: stack.url,
  region,
  runners: { token_env: "RUNNER_SECRET" },
  limits: { active: 2, loaded },
});

beforeAll(async () => {
  provider = await startScriptedProvider();
  root = mkdtempSync(path.join(tmpdir(), "svc-regions-"));
  stack = await startStack({
    config: {
      tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
      harnesses: { pi: { command: ["node", "unused-by-the-worker.js"] } },
      providers: scriptedProviders(provider.url),
      runners: { token_env: "RUNNER_SECRET", regions: { eu: { location_hint: "weur" }, us: { location_hint: "enam" } } },
    },
    env,
    runner: false,
  });
  // Two small runner-hosts in eu, one large one in us: us has the most room.
  const [eu1, eu2, us1] = await Promise.all([
    startRunner({ dir: path.join(root, "eu-1"), config: runnerConfig("eu", 2), env: runnerEnv }),
    startRunner({ dir: path.join(root, "eu-2"), config: runnerConfig("eu", 2), env: runnerEnv }),
    startRunner({ dir: path.join(root, "us-1"), config: runnerConfig("us", 8), env: runnerEnv }),
  ]);
  Object.assign(runners, { eu1, eu2, us1 });
});

afterAll(async () => {
  await Promise.all(Object.values(runners).map((r) => r.stop()));
  await stack?.stop();
  await provider?.close();
});

async function createSession(): Promise<string> {
  const r = await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } });
  expect(r.status).toBe(201);
  return r.body.id;
}

/** Sends a message and waits for its turn to end idle; returns the assistant's text. */
async function turn(id: string, text: string): Promise<string> {
  const sse = await openSse(`${stack.url}/sessions/${id}/events`, { token: env.MANAGE });
  const r = await call(stack.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text } });
  expect(r.status).toBe(202);
  const reply = await sse.waitFor((f) => f.event === "assistant.message" && f.json.input_id === r.body.id, 30_000);
  await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === r.body.id, 30_000);
  sse.close();
  return reply.json.data.text;
}

const attachedOn = (p: RunnerProcess, id: string) =>
  p.output().split("\n").some((l) => l.includes('"msg":"session attached"') && l.includes(id));

async function fleet() {
  const r = await call(stack.url, "GET", "/internal/status", { token: env.RUNNER_SECRET });
  expect(r.status).toBe(200);
  return r.body.regions as { region: string; runners: number; ready: number; free: number }[];
}

describe("three runner-hosts in two regions", () => {
  it("each region's pool sees its own runner-hosts", async () => {
    const regions = await fleet();
    expect(regions.map((r) => [r.region, r.runners, r.ready])).toEqual([
      ["eu", 2, 2],
      ["us", 1, 1],
    ]);
  });

  it("a session is homed in the region with the most room and its turns run there", async () => {
    const id = await createSession();
    expect(await turn(id, "hello from us")).toBe("echo: hello from us");
    expect(attachedOn(runners.us1!, id)).toBe(true);
    expect(attachedOn(runners.eu1!, id) || attachedOn(runners.eu2!, id)).toBe(false);
  });

  it("when every runner-host of a region leaves, its sessions are placed in the other region", async () => {
    const id = await createSession();
    await turn(id, "first");
    expect(attachedOn(runners.us1!, id)).toBe(true);

    const stopped = await runners.us1!.stop("SIGTERM");
    expect(stopped.code).toBe(0);
    // The us pool is empty now (asked fresh, not from a snapshot).
    expect((await fleet()).find((r) => r.region === "us")!.runners).toBe(0);

    expect(await turn(id, "second")).toBe("echo: second");
    expect(attachedOn(runners.eu1!, id) || attachedOn(runners.eu2!, id)).toBe(true);
    // A new session now finds room only in eu and runs there too.
    const fresh = await createSession();
    await turn(fresh, "new");
    expect(attachedOn(runners.eu1!, fresh) || attachedOn(runners.eu2!, fresh)).toBe(true);
  });
});

describe("svc runner operations", () => {
  it("-status reports a connected runner-host from its status file (a container health check)", async () => {
    const r = await runSvc(["runner", "-config", runners.eu1!.configPath, "-status"], { env: {} });
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s).toMatchObject({ healthy: true, connected: true, draining: false, region: "eu", refusals: 0 });
    expect(s.capacity.loaded_limit).toBe(2);
  });

  it("-status is not healthy while data_dir's disk has less than SVC_MIN_FREE_BYTES free, and a bad value is named", async () => {
    const args = ["runner", "-config", runners.eu1!.configPath, "-status"];
    const short = await runSvc(args, { env: { SVC_MIN_FREE_BYTES: String(Number.MAX_SAFE_INTEGER) } });
    expect(short.code, short.stderr).toBe(1);
    expect(JSON.parse(short.stdout)).toMatchObject({ healthy: false, connected: true, problem: expect.stringMatching(/^the disk of data_dir .* bytes free, under SVC_MIN_FREE_BYTES \(9007199254740991\)$/) });
    const off = await runSvc(args, { env: { SVC_MIN_FREE_BYTES: "0" } });
    expect(off.code, off.stderr).toBe(0);
    const bad = await runSvc(args, { env: { SVC_MIN_FREE_BYTES: "64MiB" } });
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.stdout)).toEqual({ healthy: false, problem: 'SVC_MIN_FREE_BYTES must be a whole number of bytes (0 turns the disk check off), not "64MiB"' });
  });

  it("SIGHUP is logged and ignored by svc runner (Node's default would kill it without a drain)", async () => {
    const p = runners.eu1!;
    const mark = p.mark();
    p.child.kill("SIGHUP");
    await p.waitFor(/"msg":"SIGHUP ignored/, 10_000, mark);
    const r = await runSvc(["runner", "-config", p.configPath, "-status"], { env: {} });
    expect(JSON.parse(r.stdout)).toMatchObject({ healthy: true, connected: true });
    expect(p.child.exitCode).toBeNull();
  });

  it("svc runner still ignores SIGHUP while it drains after SIGTERM: it stops cleanly", async () => {
    const p = await startRunner({ dir: path.join(root, "hup-drain"), config: runnerConfig("us", 2), env: runnerEnv });
    p.child.kill("SIGTERM");
    await p.waitFor(/"msg":"stopping"/);
    p.child.kill("SIGHUP");
    expect(await p.exited).toEqual({ code: 0, signal: null });
    expect(p.output()).toMatch(/"msg":"stopping"[^]*"msg":"stopped"/);
  });

  it("a second runner-host on the same data_dir refuses to start instead of taking the runner id", async () => {
    const twin = await startRunner({ dir: runners.eu1!.dir, config: runnerConfig("eu", 2), env: runnerEnv, connected: false });
    expect((await twin.exited).code).toBe(1);
    expect(twin.output()).toContain('"msg":"data_dir is in use by another svc process (a runner-host or a local stack): give each its own data_dir"');
    // The first one is untouched.
    expect((await runSvc(["runner", "-config", runners.eu1!.configPath, "-status"], { env: {} })).code).toBe(0);
  });

  it("svc runner refuses to start with an SVC_MIN_FREE_BYTES that is not a whole number of bytes", async () => {
    const bad = await startRunner({ dir: path.join(root, "bad-min-free"), config: runnerConfig("eu", 2), env: { ...runnerEnv, SVC_MIN_FREE_BYTES: "-1" }, connected: false });
    expect((await bad.exited).code).toBe(1);
    expect(bad.output()).toContain('svc: could not start: SVC_MIN_FREE_BYTES must be a whole number of bytes (0 turns the disk check off), not \\"-1\\"');
  });

  it("a refused secret is logged loudly and svc runner exits 1 after a bounded run of refusals", async () => {
    const serviceMark = stack.mark();
    const wrong = await startRunner({
      dir: path.join(root, "wrong-secret"),
      config: runnerConfig("eu", 2),
      env: { RUNNER_SECRET: secret("not-the-runner-secret") },
      connected: false,
    });
    const { code } = await wrong.exited;
    expect(code).toBe(1);
    const refusals = wrong.output().split("\n").filter((l) => l.includes('"msg":"the service refused the runner secret"'));
    expect(refusals).toHaveLength(MAX_REFUSALS);
    expect(JSON.parse(refusals[0]!)).toMatchObject({ level: "error", status: 401, url: stack.url });
    expect(wrong.output()).toContain('"msg":"giving up: the service refused this runner-host every time"');
    expect(wrong.output()).not.toContain(secret("not-the-runner-secret"));
    // The service says so too (without the secret), so an operator sees it on either side.
    const seen = stack.stderr().slice(serviceMark);
    expect(seen).toContain('"msg":"internal request refused: the runner secret is missing or wrong"');
    expect(seen).not.toContain(secret("not-the-runner-secret"));
  }, 60_000);

  it("an unknown region is refused with the service's reason; an unreachable public_url is logged loudly", async () => {
    const apac = await startRunner({ dir: path.join(root, "apac"), config: runnerConfig("apac", 2), env: runnerEnv, connected: false });
    const line = await apac.waitFor(/"msg":"the service refused this runner-host"/);
    expect(JSON.parse(line)).toMatchObject({ status: 409, reason: 'region "apac" is not configured (runners.regions: eu, us)' });
    expect((await apac.stop()).code).toBe(0);

    const lost = await startRunner({
      dir: path.join(root, "unreachable"),
      config: { ...runnerConfig("eu", 2), public_url: "http://127.0.0.1:9" },
      env: runnerEnv,
      connected: false,
    });
    expect(JSON.parse(await lost.waitFor(/"msg":"cannot reach public_url"/))).toMatchObject({ level: "error", url: "http://127.0.0.1:9" });
    expect((await lost.stop()).code).toBe(0);
  });
});
