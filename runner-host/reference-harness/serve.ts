/**
 * The reference harness's command loop, loaded by ./main.ts once the stdout guard is in place.
 * Speaks `svc-harness/1` (../harness/protocol.ts) on stdio and runs several sessions, each its own
 * pi-agent-core `Agent` (./session.ts), in one process.
 *
 * Lifecycle: writes `ready` first; `init` must precede session commands; EOF on stdin (the last
 * detach closed the host) or `shutdown` is a clean exit 0; a line that breaks framing or the
 * command schema gets `fatal` and exit 2; an unexpected crash gets `fatal` and exit 1.
 * Provider keys arrive only in `init`/`set_keys` and are never written anywhere.
 */
import { flushAndExit, writeProtocol } from "./stdout-guard.ts";
import { readFileSync } from "node:fs";
import { attachJsonlReader, DEFAULT_MAX_LINE_BYTES } from "../harness/jsonl.ts";
import {
  CommandSchema,
  PROTOCOL_VERSION,
  type Command,
  type CommandOp,
  type ErrorBody,
  type HarnessOutput,
  type NativeRecord,
  type ProviderConfig,
  type ResultOf,
} from "../harness/protocol.ts";
import { issueSummary } from "../../src/shared/zod-issues.ts";
import { getModels, getProviders } from "@mariozechner/pi-ai";
import { CommandError, OVERRIDABLE_APIS } from "./model.ts";
import { idleCollector } from "./idle-gc.ts";
import { OutputBatch } from "./out-batch.ts";
import { Session, type RuntimeOptions } from "./session.ts";
import { harnessFetch } from "./stream-end.ts";
import { wantsWarmUp, warmUp } from "./warm-up.ts";

// Before any provider client exists: they take the global fetch when they are made.
globalThis.fetch = harnessFetch(globalThis.fetch);

const ENGINE = `pi-agent-core@${packageVersion("@mariozechner/pi-agent-core")}`;
const CATALOG = `pi-ai@${packageVersion("@mariozechner/pi-ai")}`;

let providers: Record<string, ProviderConfig> | undefined;
let options: RuntimeOptions = { maxRetries: 0, toolExecution: "parallel" };
const sessions = new Map<string, Session>();
/** Native records sent ahead of a session's `open` (`state_part`), consumed by that open. */
const staged = new Map<string, NativeRecord[]>();

const out = new OutputBatch(writeProtocol);
const turnEnded = idleCollector(() => [...sessions.values()].some((s) => s.running));

function send(message: HarnessOutput): void {
  out.queue(message);
  if (message.type === "turn.end") turnEnded();
}

function fatal(message: string, code: number): void {
  if (exiting) return;
  send({ type: "fatal", message });
  exit(code);
}

let exiting = false;
function exit(code: number): void {
  if (exiting) return;
  exiting = true;
  for (const s of sessions.values()) s.interrupt();
  out.flush();
  flushAndExit(code);
}

const host = {
  emit: send,
  keyFor: (prefix: string) => providers?.[prefix]?.key || undefined,
  get options() {
    return options;
  },
  get providers() {
    return providers ?? {};
  },
};

function session(id: string): Session {
  const s = sessions.get(id);
  if (!s) throw new CommandError("unknown_session", `session ${JSON.stringify(id)} is not open`);
  return s;
}

function initialized(): Record<string, ProviderConfig> {
  if (!providers) throw new CommandError("not_initialized", "init must come first");
  return providers;
}

function checkProvider(prefix: string, p: ProviderConfig): void {
  if (p.api !== undefined && !OVERRIDABLE_APIS.includes(p.api)) {
    throw new CommandError("invalid_request", `provider ${prefix}: api "${p.api}" is not supported`);
  }
  if (p.base_url !== undefined) {
    const url = URL.parse(p.base_url);
    if (!url || !/^https?:$/.test(url.protocol) || !url.host || url.username || url.password) {
      throw new CommandError("invalid_request", `provider ${prefix}: base_url must be an http(s) URL without credentials`);
    }
  }
}

/** Runs one command; returns its `result`. Throws CommandError for a failed response. */
function execute(cmd: Command): ResultOf<CommandOp> {
  switch (cmd.op) {
    case "init": {
      if (providers) throw new CommandError("invalid_request", "init was already received");
      for (const [prefix, p] of Object.entries(cmd.providers)) checkProvider(prefix, p);
      providers = structuredClone(cmd.providers);
      options = {
        maxRetries: cmd.options?.max_retries ?? 0,
        timeoutMs: cmd.options?.timeout_ms,
        toolExecution: cmd.options?.tool_execution ?? "parallel",
      };
      const apis = transports(providers);
      prewarm(apis);
      if (wantsWarmUp(apis)) void warmUp(options).then(turnEnded); // its end is idle like a turn's
      return { engine: ENGINE, catalog: CATALOG };
    }
    case "set_keys": {
      const table = initialized();
      for (const [prefix, { key }] of Object.entries(cmd.providers)) table[prefix] = { ...table[prefix], key };
      return {};
    }
    case "state_part": {
      initialized();
      if (sessions.has(cmd.session)) throw new CommandError("conflict", `session ${cmd.session} is already open`);
      const records = staged.get(cmd.session) ?? [];
      records.push(...cmd.records);
      staged.set(cmd.session, records);
      return { records: records.length };
    }
    case "open": {
      initialized();
      const before = staged.get(cmd.session);
      staged.delete(cmd.session); // consumed by this open, whether it succeeds or not
      if (sessions.has(cmd.session)) throw new CommandError("conflict", `session ${cmd.session} is already open`);
      if (before && !cmd.state) throw new CommandError("invalid_state", "state parts were sent but open has no state");
      const state = before && cmd.state ? { ...cmd.state, records: [...before, ...cmd.state.records] } : cmd.state;
      const s = new Session({ ...cmd, state }, host);
      sessions.set(cmd.session, s);
      const { provider, id, api, contextWindow } = s.model;
      return {
        model: { provider, id, api, context_window: contextWindow },
        thinking_level: s.thinkingLevel,
        records: s.agent.state.messages.length,
      };
    }
    case "run": {
      const s = session(cmd.session);
      if (s.running) throw new CommandError("conflict", "a turn is already running in this session");
      return {};
    }
    case "tool_result":
      session(cmd.session).toolResult(cmd.call_id, cmd.result);
      return {};
    case "interrupt":
      session(cmd.session).interrupt();
      return {};
    case "export": {
      const s = session(cmd.session);
      if (s.running) throw new CommandError("conflict", "export needs an idle session");
      return { state: s.exportState() };
    }
    case "detach": {
      if (staged.delete(cmd.session) && !sessions.has(cmd.session)) return {};
      const s = session(cmd.session);
      if (s.running) throw new CommandError("conflict", "detach needs an idle session");
      sessions.delete(cmd.session);
      return {};
    }
    case "ping":
      return { sessions: sessions.size, running: [...sessions.values()].filter((s) => s.running).length };
    case "shutdown":
      return {};
  }
}

function handle(cmd: Command): void {
  let result: ResultOf<CommandOp>;
  try {
    result = execute(cmd);
  } catch (err) {
    const error: ErrorBody =
      err instanceof CommandError ? { code: err.code, message: err.message } : { code: "internal", message: String(err) };
    return send({ type: "response", id: cmd.id, ok: false, error });
  }
  send({ type: "response", id: cmd.id, ok: true, result });
  // Side effects that emit events come after the response (docs/harness-protocol.md "Envelope":
  // `run` is answered first).
  if (cmd.op === "run") sessions.get(cmd.session)!.run(cmd.turn, cmd.text);
  if (cmd.op === "shutdown") exit(0);
}

/**
 * pi-ai's provider module per transport (the ones `OVERRIDABLE_APIS` and the catalog use). Literal
 * specifiers, so the build maps each to the same file pi-ai's own lazy import loads.
 */
const PROVIDER_MODULES: Record<string, () => Promise<unknown>> = {
  "openai-completions": () => import("@mariozechner/pi-ai/openai-completions"),
  "openai-responses": () => import("@mariozechner/pi-ai/openai-responses"),
  "anthropic-messages": () => import("@mariozechner/pi-ai/anthropic"),
  "google-generative-ai": () => import("@mariozechner/pi-ai/google"),
  "mistral-conversations": () => import("@mariozechner/pi-ai/mistral"),
};

/** The transports the init table can reach: explicit `api` overrides, else the catalog's. */
function transports(table: Record<string, ProviderConfig>): Set<string> {
  const apis = new Set<string>();
  for (const [prefix, p] of Object.entries(table)) {
    if (p.api) apis.add(p.api);
    else if (getProviders().includes(prefix as never)) for (const m of getModels(prefix as never)) apis.add(m.api);
  }
  return apis;
}

/**
 * After `init`, loads the provider clients of the transports this process can call (and only
 * those), in the background: pi-ai loads them lazily on a session's first call, which put ~0.2 s
 * of module loading into the first turn of a new session, even in a warm spare process. The
 * same modules, so pi-ai's own lazy import finds them loaded.
 */
function prewarm(apis: Set<string>): void {
  for (const api of apis) PROVIDER_MODULES[api]?.().catch(() => {}); // a failure surfaces on the session's own call
}

function packageVersion(name: string): string {
  const url = new URL("../package.json", import.meta.resolve(name));
  return (JSON.parse(readFileSync(url, "utf8")) as { version: string }).version;
}

process.on("uncaughtException", (err) => fatal(`uncaught: ${err.message}`, 1));
process.on("unhandledRejection", (err) => fatal(`unhandled rejection: ${String(err)}`, 1));

attachJsonlReader(
  process.stdin,
  {
    onMessage: (value) => {
      if (exiting) return;
      const parsed = CommandSchema.safeParse(value);
      if (!parsed.success) {
        return fatal(`framing violation: invalid command (${issueSummary(parsed.error.issues, 1)})`, 2);
      }
      handle(parsed.data);
    },
    onError: (err) => fatal(`framing violation: ${err.message}`, 2),
    onEnd: () => exit(0),
  },
  DEFAULT_MAX_LINE_BYTES,
);

send({ type: "ready", protocol: PROTOCOL_VERSION, engine: `${ENGINE} ${CATALOG}`, max_line_bytes: DEFAULT_MAX_LINE_BYTES });
