/**
 * One harness process as the pool sees it: the `HarnessProcess` client, its tenant (it holds
 * sessions of that tenant only), the provider table it was started with (`init`), and what lives in it: resident sessions, opens in flight, running turns.
 *
 * Its provider table is fixed at start: a changed key means a new process (docs/harness-protocol.md
 * "Commands": a process with no running turn is recycled), never `set_keys` on a shared one,
 * because other sessions in it may still be mid-turn on the old key.
 */
import { HarnessError, HarnessProcess, type HarnessExit } from "./harness/harness-process.ts";
import { OpenCommandSchema, type CommandInput, type ResolvedModel } from "./harness/protocol.ts";
import { planOpen } from "./harness/state-parts.ts";
import { foreign } from "./error-text.ts";
import type { ProviderGrant } from "../src/shared/runner-protocol.ts";
import { issueSummary } from "../src/shared/zod-issues.ts";
import type { Logger } from "./log.ts";

/** Time an idle process gets to exit on EOF before it is killed, ms: it has nothing to finish. */
const STOP_GRACE_MS = 2_000;

export type ProviderTable = Record<string, ProviderGrant>;

/** A failed open: the harness message travels to the object as `open_failed` / `service_error`. */
export class OpenError extends Error {
  override name = "OpenError";
}

/** `expected`: the pool asked the process to stop; otherwise it crashed or was killed. */
export type ExitListener = (p: PooledProcess, exit: HarnessExit, expected: boolean) => void;

export type ProcessSpawn = {
  harness: string;
  /** The only tenant whose sessions this process holds; undefined: a spare, bound by its first open. */
  tenant: string | undefined;
  command: readonly string[];
  rootDir: string;
  baseDir?: string;
  log: Logger;
  requestTimeoutMs?: number;
};

export class PooledProcess {
  readonly harness: string;
  /** Undefined while it is a spare: started and `init`-answered, holding nothing of any tenant. */
  tenant: string | undefined;
  readonly providers: ProviderTable;
  /** Settles once the process said `ready` and accepted `init`; rejects with an OpenError. */
  readonly ready: Promise<void>;
  hp: HarnessProcess | undefined;
  /** `ending`: the process stopped taking commands (killed, a violation, `fatal`) and is exiting. */
  state: "starting" | "ready" | "ending" | "stopping" | "gone" = "starting";
  /** Sessions open in it (keys), opens in flight, running turns. */
  readonly sessions = new Set<string>();
  opening = 0;
  running = 0;

  constructor(spawn: ProcessSpawn, providers: ProviderTable, onExit: ExitListener) {
    this.harness = spawn.harness;
    this.tenant = spawn.tenant;
    this.providers = providers;
    this.ready = this.#start(spawn, onExit);
    this.ready.catch(() => {}); // observed by every open that awaits it
  }

  get pid(): number {
    return this.hp?.pid ?? -1;
  }

  /** Resident + opening: what `max_shared` bounds. */
  get load(): number {
    return this.sessions.size + this.opening;
  }

  get spare(): boolean {
    return this.tenant === undefined;
  }

  get usable(): boolean {
    return this.state === "starting" || this.state === "ready";
  }

  /** True when this process calls the grant's provider with exactly that key and transport. */
  matches(grant: ProviderGrant): boolean {
    const p = this.providers[grant.prefix];
    return p !== undefined && p.key === grant.key && p.base_url === grant.base_url && p.api === grant.api;
  }

  async open(key: string, cmd: Omit<CommandInput<"open">, "op" | "session">): Promise<ResolvedModel> {
    // A command the harness would reject as a framing violation would kill every session in it.
    const checked = OpenCommandSchema.safeParse({ id: "check", op: "open", session: key, ...cmd });
    if (!checked.success) {
      const issue = checked.error.issues[0]!;
      if (issue.path[0] === "reasoning_effort") throw new OpenError(`reasoning effort ${JSON.stringify(cmd.reasoning_effort)} is unsupported`);
      throw new OpenError(`the session cannot be opened: ${issueSummary(checked.error.issues, 1)}`);
    }
    await this.ready;
    const plan = planOpen({ op: "open", session: key, ...cmd }, this.hp!.maxLineBytes);
    if ("error" in plan) throw new OpenError(`the session cannot be opened: ${plan.error}`);
    // Answered late, the open (or a part staged for it) would stay in the harness: the detach takes
    // either back (harness-process.ts `undo`).
    const undo = { op: "detach", session: key } as const;
    let res;
    try {
      for (const part of plan.parts) {
        const r = await this.hp!.request(part, { undo });
        if (!r.ok) throw new OpenError(`the harness refused the native state: ${foreign(r.error.message)}`);
      }
      res = await this.hp!.request(plan.open, { undo });
    } catch (err) {
      if (err instanceof OpenError) throw err;
      if (err instanceof HarnessError && err.code === "too_large") throw new OpenError(`the session cannot be opened: ${err.message}`);
      if (err instanceof HarnessError && err.code === "request_timeout") throw new OpenError(`the harness did not answer: ${foreign(err.message)}`);
      throw new OpenError(`the harness process ended during open: ${foreign((err as Error).message)}`);
    }
    if (!res.ok) throw new OpenError(`the harness could not open the session: ${foreign(res.error.message)}`);
    const got = res.result.model;
    const slash = cmd.model.indexOf("/");
    if (got.provider !== cmd.model.slice(0, slash) || got.id !== cmd.model.slice(slash + 1)) {
      // A fallback to another model fails the session's turn (docs/configuration.md "Providers"),
      // at open as on every reply: the session is freed in the harness again.
      await this.detach(key);
      throw new OpenError(`the harness resolved model ${foreign(`${got.provider}/${got.id}`)} instead of ${cmd.model}`);
    }
    this.sessions.add(key);
    return got;
  }

  /** Frees the session in the harness. A refusal or a dead process changes nothing: it is off our books. */
  async detach(key: string): Promise<void> {
    this.sessions.delete(key);
    if (this.state !== "ready") return;
    await this.hp!.request({ op: "detach", session: key }).catch(() => {});
  }

  /** EOF (a clean exit), then SIGTERM/SIGKILL on the group if it lingers. */
  async stop(): Promise<void> {
    if (this.state === "gone") return;
    this.state = "stopping";
    this.sessions.clear();
    await this.ready.catch(() => {}); // a start that failed was reported where it failed; stopping goes on
    const hp = this.hp;
    if (!hp) return;
    hp.endInput();
    const timer = setTimeout(() => void hp.kill("killed", "did not exit on EOF"), STOP_GRACE_MS);
    await hp.exited;
    clearTimeout(timer);
  }

  async #start(spawn: ProcessSpawn, onExit: ExitListener): Promise<void> {
    let hp: HarnessProcess;
    try {
      hp = await HarnessProcess.start({
        command: spawn.command,
        rootDir: spawn.rootDir,
        baseDir: spawn.baseDir,
        label: spawn.harness,
        log: (rec) => relog(spawn.log, rec),
        ...(spawn.requestTimeoutMs !== undefined ? { requestTimeoutMs: spawn.requestTimeoutMs } : {}),
      });
    } catch (err) {
      this.state = "gone";
      onExit(this, { code: null, signal: null, reason: "spawn_failed", message: (err as Error).message }, false);
      throw new OpenError(`harness ${spawn.harness} could not start: ${foreign(firstLine((err as Error).message))}`);
    }
    this.hp = hp;
    hp.onEnding(() => {
      if (this.state === "starting" || this.state === "ready") this.state = "ending";
    });
    hp.onExit((exit) => {
      const expected = this.state === "stopping";
      this.state = "gone";
      onExit(this, exit, expected);
    });
    const providers = Object.fromEntries(
      Object.values(this.providers).map((g) => [g.prefix, { key: g.key, base_url: g.base_url, api: g.api }]),
    );
    const res = await hp.request({ op: "init", protocol: 1, providers }).catch((err: Error) => err);
    if (res instanceof Error || !res.ok) {
      void hp.kill();
      if (res instanceof Error) throw new OpenError(`harness ${spawn.harness} did not answer init: ${foreign(firstLine(res.message))}`);
      throw new OpenError(`harness ${spawn.harness} refused init: ${foreign(firstLine(res.error.message))}`);
    }
    if (this.state === "starting") this.state = "ready";
  }
}

function firstLine(s: string): string {
  return s.split("\n", 1)[0]!;
}

/** How a process that was not asked to stop ended: the message its running turns fail with. */
export function exitMessage(exit: HarnessExit): string {
  // The offending line and the harness's own words go to the log (HarnessProcess logs them).
  if (exit.reason === "framing_violation") return "the harness process broke stdio framing and was killed";
  if (exit.reason === "fatal") return `the harness process failed: ${foreign(exit.message)}`;
  // Killed by the runner-host for one session's sake (an interrupt it did not honour): the other
  // sessions' turns in the process end with it, and should say why rather than "crashed".
  if (exit.reason === "killed") return `the harness process was stopped by the runner-host: ${foreign(exit.message)}`;
  if (exit.signal) return `the harness process crashed (signal ${exit.signal})`;
  // Code 0 is no crash, but the process ended while the session needed it all the same.
  if (exit.code === 0) return "the harness process exited (exit code 0) while its sessions needed it";
  return `the harness process crashed (exit code ${exit.code})`;
}

/** HarnessProcess log records → our logger: level and msg lifted, the rest as flat fields. */
function relog(log: Logger, rec: Record<string, unknown>): void {
  const { level, msg, ...rest } = rec;
  const fields: Record<string, string | number | boolean | null> = {};
  for (const [k, v] of Object.entries(rest)) {
    fields[k] = v === undefined || v === null ? null : typeof v === "object" ? JSON.stringify(v) : (v as string | number | boolean);
  }
  log(level === "debug" || level === "warn" || level === "error" ? level : "info", String(msg), fields);
}
