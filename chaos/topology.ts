/**
 * What one chaos run starts and stops: the service (`svc -no-runner`, the Worker and its objects
 * in workerd), one `svc runner` process dialling it, and the loopback peers. The service keeps
 * one port and one data_dir for the whole run, so a restart after SIGKILL is the same deployment
 * and clients reconnect to the same URL.
 *
 * Lifecycle: `startTopology` → faults crash/restart parts → `stop` (SIGTERM, SIGKILL after the
 * grace), then SIGKILL to every harness process any runner reported that is still alive (a runner
 * killed with -9 leaves its harness children to exit on stdin EOF; this makes sure they did).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { buildHarness, REFERENCE_HARNESS_COMMAND } from "../scripts/build-harness.ts";
import { startPeers, type Peers } from "./peers.ts";
import { ROOT, spawnSvc, type SvcProcess } from "./process.ts";

/** How long a start may take before the run gives up, ms (two cores shared with other work). */
const START_MS = 60_000;
/** SIGTERM grace at the end of the run before SIGKILL, ms (the service drains within ~20 s). */
const STOP_GRACE_MS = 20_000;

export const TENANT_A = "acme";
export const TENANT_B = "bravo";

export type Topology = {
  base: string;
  tokens: { a: string; b: string };
  peers: Peers;
  stack: SvcProcess;
  runner: SvcProcess;
  /** Resolves while the service is up; faults that take it down close it first. */
  gate(): Promise<void>;
  down(): void;
  up(): void;
  startStack(): Promise<void>;
  startRunner(): Promise<void>;
  /** Harness pids the current runner-host reported started that are still alive. */
  currentHarnessPids(): number[];
  /** Every harness pid any runner-host of this run reported started that is still alive. */
  liveHarnessPids(): number[];
  stop(): Promise<void>;
};

export type TopologyOptions = { limits?: Record<string, number>; verbose?: boolean; keepDir?: boolean };

export async function startTopology(o: TopologyOptions = {}): Promise<Topology> {
  await buildHarness(); // the run exercises the current harness sources, never an older build
  const dir = mkdtempSync(path.join(tmpdir(), "svc-chaos-"));
  const peers = await startPeers();
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = {
    CHAOS_TOKEN_A: `chaos-a-${randomBytes(16).toString("hex")}`,
    CHAOS_TOKEN_B: `chaos-b-${randomBytes(16).toString("hex")}`,
    CHAOS_PROVIDER_KEY: "sk-chaos",
    CHAOS_RUNNER_SECRET: randomBytes(32).toString("hex"),
  };
  const config = (dataDir: string) => ({
    listen: `127.0.0.1:${port}`,
    public_url: base,
    data_dir: path.join(dir, dataDir),
    tokens: [
      { token_env: "CHAOS_TOKEN_A", tenant: TENANT_A, manage: true },
      { token_env: "CHAOS_TOKEN_B", tenant: TENANT_B, manage: true },
    ],
    harnesses: { pi: { command: REFERENCE_HARNESS_COMMAND.map((a) => (a.endsWith(".mjs") ? path.join(ROOT, a) : a)) } },
    providers: { openai: { api_key_env: "CHAOS_PROVIDER_KEY", base_url: peers.providerUrl, api: "openai-completions" } },
    tools: [{ name: "echo", description: "echoes its arguments after arguments.ms", input_schema: { type: "object" }, url: peers.toolUrl, tenants: [TENANT_A, TENANT_B] }],
    limits: o.limits ?? {},
    runners: { token_env: "CHAOS_RUNNER_SECRET" },
  });
  writeFileSync(path.join(dir, "service.json"), JSON.stringify(config("service")));
  writeFileSync(path.join(dir, "runner.json"), JSON.stringify(config("runner")));

  const runners: SvcProcess[] = [];
  let open: () => void = () => {};
  let gate = Promise.resolve();
  const t: Topology = {
    base,
    tokens: { a: env.CHAOS_TOKEN_A, b: env.CHAOS_TOKEN_B },
    peers,
    stack: undefined as unknown as SvcProcess,
    runner: undefined as unknown as SvcProcess,
    gate: () => gate,
    down() {
      gate = new Promise((r) => (open = r));
    },
    up: () => open(),
    async startStack() {
      t.stack = spawnSvc(["-config", "service.json", "-no-runner"], { cwd: dir, env, verbose: o.verbose });
      await t.stack.waitForLog(/"msg":"local stack listening"/, START_MS);
    },
    async startRunner() {
      t.runner = spawnSvc(["runner", "-config", "runner.json"], { cwd: dir, env, verbose: o.verbose });
      runners.push(t.runner);
      await t.runner.waitForLog(/"msg":"runner-host connected"/, START_MS);
    },
    currentHarnessPids: () => t.runner.harnessPids().filter(alive),
    liveHarnessPids: () => runners.flatMap((r) => r.harnessPids()).filter(alive),
    async stop() {
      await Promise.all([t.runner?.stop(STOP_GRACE_MS), t.stack?.stop(STOP_GRACE_MS)]);
      for (const pid of t.liveHarnessPids()) process.kill(pid, "SIGKILL");
      await peers.close();
      if (!o.keepDir) rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await t.startStack();
    await t.startRunner();
  } catch (e) {
    await t.stop();
    throw e;
  }
  return t;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}
