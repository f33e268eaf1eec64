/**
 * Helpers for the harness tests: spawn through `HarnessProcess`, collect a session's events, and
 * wait on them with deadlines (no sleeps, no retries).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { HarnessProcess, type HarnessProcessOptions } from "../../runner-host/harness/harness-process.ts";
import type { CommandInput, SessionEvent, ToolSpec } from "../../runner-host/harness/protocol.ts";
import { REFERENCE_HARNESS_COMMAND } from "../../scripts/build-harness.ts";

export const REPO = fileURLToPath(new URL("../..", import.meta.url));
export const REFERENCE_HARNESS = [...REFERENCE_HARNESS_COMMAND];
/** Deadline for one awaited event, ms: generous for a loaded CI machine, short enough to fail fast. */
export const EVENT_TIMEOUT_MS = 10_000;

export const WEATHER_TOOL: ToolSpec = {
  name: "get_weather",
  description: "Get the weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

/** A new harness root, inside the run's directory (test/build-harness.setup.ts removes it at the end). */
export function rootDir(): string {
  return mkdtempSync(join(process.env.SVC_TEST_HARNESS_ROOTS ?? tmpdir(), "svc-harness-test-"));
}

export interface Started {
  hp: HarnessProcess;
  logs: Record<string, unknown>[];
}

export async function startHarness(opts: Partial<HarnessProcessOptions> = {}): Promise<Started> {
  const logs: Record<string, unknown>[] = [];
  const hp = await HarnessProcess.start({
    command: REFERENCE_HARNESS,
    rootDir: rootDir(),
    baseDir: REPO,
    log: (r) => logs.push(r),
    ...opts,
  });
  return { hp, logs };
}

/** Collects every event of one session, in order, and lets a test wait for the next match. */
export class EventLog {
  readonly events: SessionEvent[] = [];
  #cursor = 0;
  #wake = new Set<() => void>();

  constructor(hp: HarnessProcess, session: string) {
    hp.onEvent(session, (e) => {
      this.events.push(e);
      for (const w of this.#wake) w();
    });
  }

  /** The next event (after the previous match) satisfying `pred`. */
  next<T extends SessionEvent["type"]>(
    type: T,
    pred: (e: Extract<SessionEvent, { type: T }>) => boolean = () => true,
    timeoutMs = EVENT_TIMEOUT_MS,
  ): Promise<Extract<SessionEvent, { type: T }>> {
    return new Promise((resolve, reject) => {
      const check = () => {
        for (let i = this.#cursor; i < this.events.length; i++) {
          const e = this.events[i]!;
          if (e.type === type && pred(e as Extract<SessionEvent, { type: T }>)) {
            this.#cursor = i + 1;
            this.#wake.delete(check);
            clearTimeout(timer);
            return resolve(e as Extract<SessionEvent, { type: T }>);
          }
        }
      };
      const timer = setTimeout(() => {
        this.#wake.delete(check);
        const seen = this.events.slice(this.#cursor).map((e) => e.type).join(", ");
        reject(new Error(`no ${type} within ${timeoutMs} ms; events since cursor: [${seen}]`));
      }, timeoutMs);
      this.#wake.add(check);
      check();
    });
  }

  /** Events of one turn, in order. */
  turn(turn: string): SessionEvent[] {
    return this.events.filter((e) => e.turn === turn);
  }
}

export async function ok<C extends CommandInput>(hp: HarnessProcess, cmd: C) {
  const res = await hp.request(cmd);
  if (!res.ok) throw new Error(`${cmd.op} failed: ${res.error.code} ${res.error.message}`);
  return res.result;
}

export function initCommand(url: string, key = "test-key-1"): CommandInput<"init"> {
  return { op: "init", protocol: 1, providers: { openai: { key, base_url: url, api: "openai-completions" } } };
}

/**
 * A harness from one snippet of JavaScript, run for each command after `ready`: `cmd` is the
 * command, `out(m)` writes one protocol line and `ok(result)` answers `cmd` with a success.
 */
export function commandHarness(engine: string, onCommand: string): string[] {
  return [
    "node",
    "-e",
    `const out = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
     out({ type: "ready", protocol: 1, engine: ${JSON.stringify(engine)}, max_line_bytes: 1 << 20 });
     let buf = "";
     process.stdin.on("data", (c) => {
       buf += c;
       for (let i; (i = buf.indexOf("\\n")) >= 0; ) {
         const cmd = JSON.parse(buf.slice(0, i));
         buf = buf.slice(i + 1);
         const ok = (result) => out({ type: "response", id: cmd.id, ok: true, result });
         ${onCommand}
       }
     });`,
  ];
}

/** What `open` answers in the inline harnesses: the model every test session asks for. */
export const OPENED = `{ model: { provider: "openai", id: "gpt-4o-mini", api: "openai-completions", context_window: 1 }, thinking_level: "off", records: 0 }`;

/**
 * A minimal inline harness for fault tests: says ready, accepts init and open, answers `run` and
 * then runs `onRun` (JavaScript; `out(m)` writes one protocol line and `cmd` is the `run`), and
 * answers every other command but `export` with an empty success (`ping` with its counts).
 */
export function inlineHarness(engine: string, onRun: string): string[] {
  return commandHarness(
    engine,
    `if (cmd.op === "init") ok({ engine: "e", catalog: "c" });
         else if (cmd.op === "open") ok(${OPENED});
         else if (cmd.op === "run") { ok({}); ${onRun} }
         else if (cmd.op === "ping") ok({ sessions: 1, running: 0 });
         else if (cmd.op !== "export") ok({});`,
  );
}
