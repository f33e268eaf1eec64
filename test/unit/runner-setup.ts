/**
 * The rig of the runner-host tests: the fake service side (./runner-fake-service.ts), the scripted
 * provider, a tiny node:http tool server whose calls a test can hold open, and a `RunnerHost`
 * with the real reference harness. One rig per test: limits differ and processes must not leak.
 */
import { mkdtempSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { parseHostConfig, type HostConfig } from "../../src/shared/config-schema.ts";
import { newId } from "../../src/shared/ids.ts";
import type { LinkDown, ProviderGrant } from "../../src/shared/runner-protocol.ts";
import type { Logger } from "../../runner-host/log.ts";
import { RunnerHost, type RunnerHostOptions } from "../../runner-host/runner-host.ts";
import { FakeService, RUNNER_SECRET, type FakeSession } from "./runner-fake-service.ts";
import { REFERENCE_HARNESS, REPO } from "./harness-helpers.ts";
import { Waiter } from "./runner-waiter.ts";

export const TOOL_TOKEN = "tool-bearer-0123456789";
export const WEATHER = {
  name: "get_weather",
  description: "Get the weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
export const SLOW = { name: "slow_tool", description: "Waits until the test lets it answer", input_schema: { type: "object" } };
export const INSPECT = { name: "inspect_tool", description: "Reads the session it serves", input_schema: { type: "object" } };
/** An MCP host tool served by this rig's tool server, which refuses its initialize (the call fails having reached it). */
export const MCP_PROBE = { name: "mcp_probe", description: "An MCP tool", input_schema: { type: "object" } };
/** Enabled for sessions, but no host tool serves it. */
export const ORPHAN = { name: "orphan_tool", description: "No host tool behind it", input_schema: { type: "object" } };

/** `at`: performance.now() when the request arrived. */
type ToolCall = { path: string; headers: IncomingMessage["headers"]; body: any; res: ServerResponse; at: number };

export class ToolServer {
  readonly calls = new Waiter<ToolCall>();
  url = "";
  #server: Server;
  constructor() {
    this.#server = createServer((req, res) => {
      let raw = "";
      const at = performance.now();
      req.on("data", (c: Buffer) => (raw += c.toString("utf8")));
      req.on("end", () => {
        const call = { path: req.url ?? "/", headers: req.headers, body: raw ? JSON.parse(raw) : undefined, res, at };
        // `/mcp` is no MCP server: its initialize is refused, so an MCP call fails having reached it.
        if (call.path === "/mcp") res.writeHead(404).end();
        else if (call.path !== "/slow") {
          res.writeHead(200, { "content-type": "text/event-stream" });
          res.write(`event: progress\ndata: ${JSON.stringify({ step: 1 })}\n\n`);
          res.write(`event: result\ndata: ${JSON.stringify({ content: [{ type: "text", text: "sunny, 21 C" }] })}\n\n`);
          res.end();
        }
        this.calls.push(call); // `/slow` is answered by the test (or never)
      });
    });
  }
  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }
  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}

export type RigOptions = {
  limits?: { active?: number; loaded?: number };
  /** `spares` defaults to 0 here, so process counts in tests mean what they say; runner-spares.test.ts sets it. */
  harness?: { command?: string[]; max_shared?: number; max_active_turns?: number; max_hosts?: number; max_starting?: number; spares?: number };
  host?: Partial<RunnerHostOptions>;
  /** Tenants the configuration names besides `acme` (one token each). */
  tenants?: string[];
};

export class Rig {
  svc!: FakeService;
  provider!: ScriptedProvider;
  tools = new ToolServer();
  host!: RunnerHost;
  config!: HostConfig;
  readonly logs = new Waiter<{ level: string; msg: string; fields: Record<string, unknown> }>();

  static async start(o: RigOptions = {}): Promise<Rig> {
    const rig = new Rig();
    [rig.svc, rig.provider] = await Promise.all([FakeService.start(), startScriptedProvider(), rig.tools.start()]);
    const parsed = parseHostConfig({
      tokens: [{ token_env: "T", tenant: "acme", manage: true }, ...(o.tenants ?? []).map((tenant) => ({ token_env: `T_${tenant}`, tenant }))],
      harnesses: { ref: { command: REFERENCE_HARNESS, spares: 0, ...o.harness } },
      tools: [
        { name: WEATHER.name, description: WEATHER.description, input_schema: WEATHER.input_schema, url: `${rig.tools.url}/weather`, tenants: ["acme"], token_env: "TOOL_TOKEN" },
        { name: SLOW.name, description: SLOW.description, input_schema: SLOW.input_schema, url: `${rig.tools.url}/slow`, tenants: ["acme"] },
        { ...INSPECT, url: `${rig.tools.url}/inspect`, tenants: ["acme"], inspect_session: true },
        { ...MCP_PROBE, url: `${rig.tools.url}/mcp`, tenants: ["acme"], mcp_tool: "probe" },
      ],
      limits: o.limits ?? {},
    });
    if (!parsed.ok) throw new Error(parsed.problems.join("; "));
    rig.config = parsed.config;
    const log: Logger = (level, msg, fields = {}) => rig.logs.push({ level, msg, fields });
    rig.host = new RunnerHost({
      baseUrl: rig.svc.url,
      secret: RUNNER_SECRET,
      runnerId: newId(),
      config: rig.config,
      rootDir: mkdtempSync(join(tmpdir(), "svc-runner-test-")),
      baseDir: REPO,
      env: { TOOL_TOKEN },
      log,
      // Sessions are droppable for room as soon as they are idle (one test sets the quiet time).
      yieldAfterMs: 0,
      ...o.host,
    });
    rig.host.start();
    return rig;
  }

  grant(key = "test-key-1"): ProviderGrant {
    return { prefix: "openai", key, base_url: this.provider.url, api: "openai-completions" };
  }

  /** Attaches a session (lease 1 unless given), sends `open`; `opened(fake)` waits for the answer. */
  async open(name: string, extra: Partial<Extract<LinkDown, { t: "open" }>> = {}, records?: unknown[], lease?: number): Promise<FakeSession> {
    const fake = await this.svc.attach(name, lease === undefined ? {} : { lease });
    fake.send({
      t: "open",
      session_id: newId(),
      tenant: "acme",
      harness: "ref",
      model: "openai/gpt-4o-mini",
      tools: [WEATHER, SLOW, ORPHAN, INSPECT],
      provider: this.grant(),
      native_parts: records ? 1 : 0,
      ...extra,
    });
    if (records) fake.send({ t: "native", records });
    return fake;
  }

  /** Sends a run and returns its turn id. */
  run(fake: FakeSession, text: string, extra: Partial<Extract<LinkDown, { t: "run" }>> = {}): string {
    const turn = newId();
    fake.send({ t: "run", turn, text, accepted_at: Date.now(), provider: this.grant(), ...extra });
    return turn;
  }

  async stop(): Promise<void> {
    await this.host.stop();
    await Promise.all([this.svc.close(), this.provider.close(), this.tools.close()]);
  }
}

export async function opened(fake: FakeSession): Promise<void> {
  const m = await fake.ups.next((m) => m.t === "opened" || m.t === "open_failed");
  if (m.t !== "opened") throw new Error(`open failed: ${JSON.stringify(m)}`);
}

export function turnEnd(fake: FakeSession, turn: string) {
  return fake.ups.find((m) => m.t === "turn_end" && m.turn === turn) as Promise<Extract<import("../../src/shared/runner-protocol.ts").LinkUp, { t: "turn_end" }>>;
}

/** True if the process is alive (signal 0 probes without signalling). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
