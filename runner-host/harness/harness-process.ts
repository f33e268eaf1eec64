/**
 * The runner-host's client for ONE harness process speaking `svc-harness/1` over stdio.
 *
 * Owns: the child (its own process group; started by the process starter, ./spawner.ts, through
 * ./clean-spawn.ts, so it holds no inherited descriptor but stdio and, under a root runner-host,
 * runs as an unprivileged user), a private directory holding its cwd, HOME and TMPDIR (owned by
 * the child's user, removed when it exits), the correlation table of in-flight requests and the
 * per-session event listeners.
 * Invariants:
 * - The child's environment is exactly PATH, HOME, TMPDIR and LANG (docs/harness-protocol.md
 *   "The process": ambient host variables are stripped). Provider keys travel only inside
 *   `init`/`set_keys` on stdin, and are redacted from re-logged stderr.
 * - Every request settles: with its response, or with a HarnessError on timeout, framing
 *   violation or exit. Nothing is left hanging when the child dies.
 * - Any framing violation (unparsable line, unknown type, unknown field, response to an id we
 *   never sent or already answered, a second `ready`, anything before `ready`) kills the process
 *   and is reported as `framing_violation` (docs/harness-protocol.md "Transport"). A response
 *   that comes after its request timed out is dropped. The violation's detail goes to the log only.
 * - A `fatal` ends the process's service at once (every command refused, `onEnding` told) and the
 *   process itself FATAL_EXIT_GRACE_MS later if it has not exited by then.
 */
import { existsSync } from "node:fs";
import { chown, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { issueSummary } from "../../src/shared/zod-issues.ts";
import { redactValues } from "../error-text.ts";
import { writeLogLine } from "../log.ts";
import { cannotRun, harnessIdentity, lookPath, wrappedCommand, type Identity } from "./clean-spawn.ts";
import { spawner, type SpawnedChild } from "./spawner.ts";
import { harnessUidRange, HarnessUsers, privateDirOf } from "./harness-users.ts";
import { StderrRelay } from "./stderr-relay.ts";
import { attachJsonlReader, DEFAULT_MAX_LINE_BYTES, lineTooDeep, MAX_LINE_DEPTH, serializeJsonLine } from "./jsonl.ts";
import {
  HarnessOutputSchema,
  MAX_ID_CHARS,
  RESULT_SCHEMAS,
  type AssistantDeltaEvent,
  type CommandInput,
  type CommandOp,
  type ReadyEvent,
  type ResponseOf,
  type SessionEvent,
} from "./protocol.ts";

/** Deadline for the first line (`ready`), ms. pi-ai loads its catalog at import: ~0.3-1 s. */
export const DEFAULT_READY_TIMEOUT_MS = 15_000;
/** Time a harness gets between SIGTERM and SIGKILL, ms (execa/pi-mono use 1-5 s). */
export const DEFAULT_KILL_GRACE_MS = 2_000;
/** Deadline for a response, ms. Every op answers at once (a `run` reply means "accepted"). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
/** After `exit`, how long stdio may stay open (a stray grandchild holding the pipes), ms. */
const CLOSE_AFTER_EXIT_MS = 2_000;
/** Timed-out request ids remembered for a late answer: far more than ever time out in one process. */
const LATE_IDS_KEPT = 1024;
/**
 * How long a process may keep running after closing its stdout, ms: it can no longer answer or end
 * a turn, so it is then ended as a framing violation. The grace covers an exit whose `exit` event
 * Node delivers after the end of the pipe.
 */
const STDOUT_EOF_GRACE_MS = 1_000;
/**
 * After `fatal` ("about to exit"), how long the process may take to exit on its own before it is
 * signalled, ms: a harness that writes `fatal` and stays would otherwise hold its sessions, its turns
 * and the runner-host's stop forever, refusing every command.
 */
const FATAL_EXIT_GRACE_MS = 1_000;

/** A framing violation as requests see it; the violation itself is logged. */
const FRAMING_BROKEN = "the harness broke stdio framing (the runner-host's log names how)";

export type HarnessLogger = (record: Record<string, unknown>) => void;

export interface HarnessProcessOptions {
  /** argv of the harness; `node` in `command[0]` means this Node (`process.execPath`). */
  command: readonly string[];
  /**
   * The private directory is created under this directory; for a harness running as another user
   * (`identity`), under the system temp directory instead, since every directory above it must
   * be traversable by that user.
   */
  rootDir: string;
  /**
   * Who the child runs as; default: `harnessIdentity()` (a user of its own when we are root);
   * "own": a user of its own; null: ourselves.
   */
  identity?: Identity | "own" | null;
  /** Relative paths in `command` that exist here are made absolute (the child's cwd is private). */
  baseDir?: string;
  /** Name used in log records. */
  label?: string;
  readyTimeoutMs?: number;
  killGraceMs?: number;
  requestTimeoutMs?: number;
  log?: HarnessLogger;
}

export type ExitReason = "exited" | "killed" | "framing_violation" | "fatal" | "ready_timeout" | "spawn_failed";

/** How the process ended. `code` and `signal` are kept apart: death by signal is not success. */
export interface HarnessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  reason: ExitReason;
  message: string;
}

export type HarnessErrorCode = "exited" | "framing_violation" | "request_timeout" | "not_running" | "too_large";

export class HarnessError extends Error {
  override name = "HarnessError";
  readonly code: HarnessErrorCode;
  constructor(code: HarnessErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

interface Pending {
  op: CommandOp;
  resolve(response: ResponseOf<CommandOp>): void;
  reject(error: HarnessError): void;
  timer: NodeJS.Timeout;
}

/** A timed-out request's undo, and which write of its kind and session it was. */
type Late = { undo: CommandInput; group: string; nth: number };

/**
 * The kind of a session command for `undo`: a `run`, or an open (its `state_part`s and the `open`
 * they lead to), with the session; none for the others.
 */
function undoGroup(command: CommandInput): string | undefined {
  if (command.op === "run") return `run\u0000${command.session}`;
  if (command.op === "open" || command.op === "state_part") return `open\u0000${command.session}`;
  return undefined;
}

const defaultLogger: HarnessLogger = writeLogLine;

export class HarnessProcess {
  readonly pid: number;
  readonly workDir: string;
  /** The `ready` event; set once `start` resolves. */
  ready!: ReadyEvent;
  /** Spawn to `ready`, ms (metric `svc.runner.startup`). */
  startupMs = 0;
  /** Settles once, when the process is gone and its directory removed. */
  readonly exited: Promise<HarnessExit>;

  #child: SpawnedChild;
  #opts: Required<Omit<HarnessProcessOptions, "baseDir" | "identity">>;
  #pending = new Map<string, Pending>();
  /**
   * Requests that timed out (the newest LATE_IDS_KEPT): their answer may still come, and is then
   * dropped (a slow answer is not a framing violation, which would end every session here), after
   * its `undo` when it accepted something no one waits for any more.
   */
  #late = new Map<string, Late | undefined>();
  /** Session commands written, per kind (`undoGroup`) and session: a late answer tells whether a later one went. */
  #written = new Map<string, number>();
  #listeners = new Map<string, Set<(event: SessionEvent) => void>>();
  #exitListeners = new Set<(exit: HarnessExit) => void>();
  #onReady?: (ready: ReadyEvent) => void;
  #nextId = 1;
  #secrets = new Set<string>();
  #stderr!: StderrRelay;
  #endReason?: { reason: ExitReason; message: string };
  #exitInfo?: HarnessExit;
  #resolveExited!: (exit: HarnessExit) => void;
  #killTimer?: NodeJS.Timeout;
  #eofTimer?: NodeJS.Timeout;
  #fatalTimer?: NodeJS.Timeout;
  #endingListeners = new Set<() => void>();
  #violated = false;
  /** The user this process alone runs as (./harness-users.ts): released once the process is gone. */
  #ownUser?: Identity;

  /** Spawns the harness and resolves once it said `ready`; kills it and rejects otherwise. */
  static async start(options: HarnessProcessOptions): Promise<HarnessProcess> {
    const plan = options.identity === undefined ? harnessIdentity() : (options.identity ?? undefined);
    const own = plan === "own" ? harnessUsers().acquire() : undefined;
    return HarnessProcess.#start(options, own ?? (plan === "own" ? undefined : plan), own !== undefined);
  }

  /** `ownUser`: `identity` is this process's alone; released when it exits (or here, if it never starts). */
  static async #start(options: HarnessProcessOptions, identity: Identity | undefined, ownUser: boolean): Promise<HarnessProcess> {
    const logError = (msg: string, fields: Record<string, unknown>) => (options.log ?? defaultLogger)({ level: "error", msg, harness: options.label ?? "harness", ...fields });
    const ownUid = ownUser ? identity!.uid : undefined;
    const argv = resolveCommand(options.command, options.baseDir ?? process.cwd());
    const PATH = process.env.PATH ?? "/usr/bin:/bin";
    let dir: string | undefined;
    let file: string;
    try {
      // The wrapper execs the harness itself, so a binary that is missing, or that the harness's
      // user may not run, is caught here, as spawn would.
      file = lookPath(argv[0]!, PATH, identity);
      // A file found on PATH was found runnable; a path as given, or a name found nowhere, is checked here.
      const refused = file === argv[0] ? cannotRun(file, identity) : undefined;
      if (refused) throw new HarnessError("exited", `exited before ready (spawn_failed, code null): spawn ${file} ${refused}`);
      // A user of its own was claimed with its private directory (./harness-users.ts).
      const made = ownUid !== undefined ? privateDirOf(ownUid) : await mkdtemp(join(identity ? tmpdir() : options.rootDir, "svc-harness-"));
      dir = made;
      const subdirs = ["home", "tmp", "work"].map((d) => join(made, d));
      await Promise.all(subdirs.map((d) => mkdir(d, { mode: 0o700 })));
      if (identity) await Promise.all([made, ...subdirs].map((d) => chown(d, identity.uid, identity.gid)));
    } catch (err) {
      // The start's own error is the one to report; a release that fails keeps the id held (never reused).
      await removePrivate(dir, ownUid, logError);
      throw err;
    }
    const started = performance.now();
    const env = { PATH, HOME: join(dir, "home"), TMPDIR: join(dir, "tmp"), LANG: "C.UTF-8" };
    // Through the wrapper: inherited descriptors closed, then the harness exec'd in its place.
    const [wrapper, args] = wrappedCommand([file, ...argv.slice(1)], PATH);
    let child: SpawnedChild;
    try {
      // Own process group (the helper starts every child so), so kill() reaches everything the harness started.
      child = await spawner().spawn({ file: wrapper, args, cwd: join(dir, "work"), env, ...(identity ? { uid: identity.uid, gid: identity.gid } : {}) });
    } catch (err) {
      const message = (err as Error).message;
      logError("harness process error", { error: message });
      await removePrivate(dir, ownUid, logError);
      throw new HarnessError("exited", `exited before ready (spawn_failed, code null): ${message}`);
    }
    const hp = new HarnessProcess(options, dir, child);
    hp.#ownUser = ownUser ? identity : undefined;
    let readyTimer: NodeJS.Timeout | undefined;
    let unsubscribe = () => {};
    try {
      hp.ready = await new Promise<ReadyEvent>((resolveReady, rejectReady) => {
        hp.#onReady = resolveReady;
        unsubscribe = hp.onExit((exit) => rejectReady(hp.#exitError(exit, "exited before ready")));
        readyTimer = setTimeout(() => {
          void hp.#end("ready_timeout", `no ready within ${hp.#opts.readyTimeoutMs} ms`);
        }, hp.#opts.readyTimeoutMs);
      });
    } catch (err) {
      await hp.exited; // the private directory is gone before the caller hears about it
      throw err;
    } finally {
      clearTimeout(readyTimer);
      unsubscribe();
    }
    hp.startupMs = performance.now() - started;
    return hp;
  }

  private constructor(options: HarnessProcessOptions, dir: string, child: SpawnedChild) {
    this.workDir = dir;
    this.#opts = {
      command: options.command,
      rootDir: options.rootDir,
      label: options.label ?? "harness",
      readyTimeoutMs: options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS,
      killGraceMs: options.killGraceMs ?? DEFAULT_KILL_GRACE_MS,
      requestTimeoutMs: options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
      log: options.log ?? defaultLogger,
    };
    this.exited = new Promise((r) => (this.#resolveExited = r));
    this.#child = child;
    this.pid = child.pid;
    this.#wire(child);
  }

  /** Longest line the harness reads, in UTF-8 bytes (its `ready`), at most our own reader's limit. */
  get maxLineBytes(): number {
    return Math.min(this.ready?.max_line_bytes ?? DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_LINE_BYTES);
  }

  get exitInfo(): HarnessExit | undefined {
    return this.#exitInfo;
  }

  /**
   * Sends a command and resolves with its response (ok or not). Keys in init/set_keys are never
   * logged. `undo`: what takes the command back in the harness if it times out (`detach` for an
   * open, `interrupt` for a run): sent at the timeout, for a harness that takes commands in order,
   * and again when a late acceptance comes, for one that takes them concurrently — unless a later
   * command of the same kind for the same session was written meanwhile, which the undo (it names
   * the session, not the command) would take back instead.
   */
  request<C extends CommandInput>(command: C, opts: { timeoutMs?: number; undo?: CommandInput } = {}): Promise<ResponseOf<C["op"]>> {
    if (this.#endReason || this.#exitInfo || !this.#child.stdin.writable) {
      return Promise.reject(new HarnessError("not_running", `harness ${this.pid} is not running`));
    }
    if (command.op === "init" || command.op === "set_keys") {
      for (const p of Object.values(command.providers)) if (p.key.length >= 4) this.#secrets.add(p.key);
    }
    const id = `c${this.#nextId++}`;
    const line = serializeJsonLine({ id, ...command });
    // A line over the harness's limit is a framing violation there and would end every session in
    // the process: it is refused here instead, and only this request fails.
    const size = Buffer.byteLength(line, "utf8") - 1;
    if (size > this.maxLineBytes) {
      return Promise.reject(new HarnessError("too_large", `${command.op} is ${size} bytes, over the harness's line limit (${this.maxLineBytes} bytes)`));
    }
    // Likewise a line past the nesting bound (a record stored before the bound held).
    if (lineTooDeep(line)) {
      return Promise.reject(new HarnessError("too_large", `${command.op} nests deeper than ${MAX_LINE_DEPTH} levels, the protocol's bound`));
    }
    return new Promise((resolveReq, rejectReq) => {
      const timeoutMs = opts.timeoutMs ?? this.#opts.requestTimeoutMs;
      const group = undoGroup(command);
      const nth = group ? this.#count(group, 1) : 0;
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        const late = opts.undo && group ? { undo: opts.undo, group, nth } : undefined;
        this.#late.set(id, late);
        if (this.#late.size > LATE_IDS_KEPT) this.#late.delete(this.#late.keys().next().value!);
        if (late) this.request(late.undo).catch(() => {});
        rejectReq(new HarnessError("request_timeout", `${command.op} got no response within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, {
        op: command.op,
        resolve: resolveReq as (r: ResponseOf<CommandOp>) => void,
        reject: rejectReq,
        timer,
      });
      this.#child.stdin.write(line);
    });
  }

  /** Commands of one kind for one session written so far, after adding `add`. */
  #count(group: string, add = 0): number {
    const n = (this.#written.get(group) ?? 0) + add;
    if (add) this.#written.set(group, n);
    return n;
  }

  /** Events of one session. Returns an unsubscribe function. */
  onEvent(session: string, listener: (event: SessionEvent) => void): () => void {
    let set = this.#listeners.get(session);
    if (!set) this.#listeners.set(session, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.#listeners.delete(session);
    };
  }

  onExit(listener: (exit: HarnessExit) => void): () => void {
    if (this.#exitInfo) {
      listener(this.#exitInfo);
      return () => {};
    }
    this.#exitListeners.add(listener);
    return () => this.#exitListeners.delete(listener);
  }

  /** Closes stdin: a harness exits cleanly on EOF (the last detach closes the host). */
  endInput(): void {
    this.#child.stdin.end();
  }

  /** SIGTERM to the process group, SIGKILL after the grace period unless it exited first. */
  kill(reason: ExitReason = "killed", message = "killed by the runner-host"): Promise<HarnessExit> {
    return this.#end(reason, message);
  }

  /** Called once, when the process stops taking commands (it is ending: killed, a violation, `fatal`). */
  onEnding(listener: () => void): void {
    if (this.#endReason || this.#exitInfo) listener();
    else this.#endingListeners.add(listener);
  }

  /** The first reason wins; a later kill (after `fatal`) still signals the process. */
  #end(reason: ExitReason, message: string): Promise<HarnessExit> {
    if (this.#exitInfo) return this.exited;
    this.#beginEnd(reason, message, new HarnessError(errorCode(reason), requestMessage(reason, message)));
    if (this.#killTimer) return this.exited; // SIGTERM already sent
    clearTimeout(this.#fatalTimer);
    this.#signalGroup("SIGTERM");
    this.#killTimer = setTimeout(() => {
      if (this.#child.exitCode === null && this.#child.signalCode === null) this.#signalGroup("SIGKILL");
    }, this.#opts.killGraceMs);
    return this.exited;
  }

  #beginEnd(reason: ExitReason, message: string, error: HarnessError): void {
    if (this.#endReason) return;
    this.#endReason = { reason, message };
    this.#rejectAll(error);
    for (const l of this.#endingListeners) this.#safely("ending listener", l);
    this.#endingListeners.clear();
  }

  #signalGroup(signal: NodeJS.Signals): void {
    if (this.pid <= 0) return;
    try {
      process.kill(-this.pid, signal);
    } catch {
      // ESRCH: the group is already gone.
    }
  }

  #wire(child: SpawnedChild): void {
    child.stdin.on("error", () => {}); // EPIPE after the child died; `exit` reports it
    for (const stream of [child.stdout, child.stderr]) {
      stream.on("error", (err) => this.#log("warn", "harness pipe error", { error: err.message }));
    }
    attachJsonlReader(
      child.stdout,
      {
        onMessage: (value) => this.#handleOutput(value),
        onError: (err) => this.#violation(err.message),
        onEnd: () => {
          this.#eofTimer = setTimeout(() => {
            if (child.exitCode === null && child.signalCode === null) this.#violation("stdout closed while the process kept running");
          }, STDOUT_EOF_GRACE_MS);
        },
      },
      DEFAULT_MAX_LINE_BYTES,
      (line) => this.#redact(line),
    );
    this.#stderr = new StderrRelay(child.stderr, (level, msg, fields) => this.#log(level, msg, fields), (text) => this.#redact(text));
    let closeTimer: NodeJS.Timeout | undefined;
    child.on("exit", () => {
      clearTimeout(this.#killTimer);
      clearTimeout(this.#eofTimer);
      clearTimeout(this.#fatalTimer);
      this.#signalGroup("SIGKILL"); // leftovers of the group must not outlive the harness
      closeTimer = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, CLOSE_AFTER_EXIT_MS);
    });
    child.on("close", (code, signal) => {
      clearTimeout(closeTimer);
      const end = this.#endReason ?? { reason: "exited" as const, message: "the harness exited" };
      this.#finish(code, signal, end.reason, end.message);
    });
  }

  #finish(code: number | null, signal: NodeJS.Signals | null, reason: ExitReason, message: string): void {
    if (this.#exitInfo) return;
    clearTimeout(this.#killTimer);
    const exit: HarnessExit = { code, signal, reason, message };
    this.#exitInfo = exit;
    this.#rejectAll(this.#exitError(exit, "harness exited"));
    clearTimeout(this.#eofTimer);
    this.#stderr.flush();
    const clean = reason === "exited" && code === 0;
    this.#log(clean ? "info" : "warn", "harness exited", { ...exit, ...(clean ? {} : { stderr_tail: this.#stderr.tail }) });
    for (const l of this.#exitListeners) this.#safely("exit listener", () => l(exit));
    this.#exitListeners.clear();
    void this.#cleanUp().finally(() => this.#resolveExited(exit));
  }

  /** After the exit (see `removePrivate`). */
  #cleanUp(): Promise<void> {
    return removePrivate(this.workDir, this.#ownUser?.uid, (msg, fields) => this.#log("error", msg, fields));
  }

  #handleOutput(value: Record<string, unknown>): void {
    if (this.#violated) return;
    if (isPlainDelta(value)) {
      // The hot path (most lines of a turn): checked by hand, exactly as the schema would accept it.
      if (this.#onReady) return this.#violation("assistant.delta before ready");
      for (const l of this.#listeners.get(value.session) ?? []) this.#safely("event listener", () => l(value));
      return;
    }
    const parsed = HarnessOutputSchema.safeParse(value);
    if (!parsed.success) {
      return this.#violation(`invalid message (${issueSummary(parsed.error.issues, 1)})`);
    }
    const msg = parsed.data;
    if (msg.type === "ready") {
      if (!this.#onReady) return this.#violation("second ready");
      const onReady = this.#onReady;
      this.#onReady = undefined;
      return onReady(msg);
    }
    if (this.#onReady) return this.#violation(`${msg.type} before ready`);
    switch (msg.type) {
      case "response": {
        const pending = this.#pending.get(msg.id);
        if (!pending && this.#late.has(msg.id)) {
          const late = this.#late.get(msg.id);
          this.#late.delete(msg.id);
          this.#log("warn", "harness answered after its request timed out: dropped", { id: msg.id });
          if (late && msg.ok && this.#count(late.group) === late.nth) this.request(late.undo).catch(() => {});
          return;
        }
        if (!pending) return this.#violation(`response to an id never sent or already answered: ${JSON.stringify(msg.id)}`);
        if (msg.ok) {
          const result = RESULT_SCHEMAS[pending.op].safeParse(msg.result);
          if (!result.success) return this.#violation(`malformed ${pending.op} result (${issueSummary(result.error.issues, 1)})`);
        }
        this.#pending.delete(msg.id);
        clearTimeout(pending.timer);
        return pending.resolve(msg as ResponseOf<CommandOp>);
      }
      case "fatal": {
        // Redacted once here: the message is logged again with the exit and reaches requests' errors.
        const message = this.#redact(msg.message);
        this.#log("error", "harness fatal", { error: message });
        this.#beginEnd("fatal", message, new HarnessError("exited", `harness fatal: ${message}`));
        this.#fatalTimer ??= setTimeout(() => void this.#end("fatal", message), FATAL_EXIT_GRACE_MS);
        return;
      }
      default:
        for (const l of this.#listeners.get(msg.session) ?? []) this.#safely("event listener", () => l(msg));
    }
  }

  /** A listener's bug must not become an uncaught exception inside the stdout reader. */
  #safely(what: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.#log("error", `harness ${what} threw`, { error: (err as Error).message });
    }
  }

  #violation(detail: string): void {
    if (this.#violated) return;
    this.#violated = true;
    this.#log("error", "harness framing violation", { error: this.#redact(detail) });
    void this.#end("framing_violation", `framing violation: ${this.#redact(detail)}`);
  }

  #rejectAll(error: HarnessError): void {
    for (const p of this.#pending.values()) {
      clearTimeout(p.timer);
      p.reject(error);
    }
    this.#pending.clear();
  }

  /** The error requests fail with. No stderr: that is shared with other sessions and goes to logs only. */
  #exitError(exit: HarnessExit, what: string): HarnessError {
    const how = exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
    return new HarnessError(errorCode(exit.reason), `${what} (${exit.reason}, ${how}): ${requestMessage(exit.reason, exit.message)}`);
  }

  #log(level: string, msg: string, fields: Record<string, unknown>): void {
    this.#opts.log({ level, msg, harness: this.#opts.label, pid: this.pid, ...fields });
  }

  #redact(text: string): string {
    return redactValues(text, this.#secrets);
  }
}

function errorCode(reason: ExitReason): HarnessErrorCode {
  return reason === "framing_violation" ? "framing_violation" : "exited";
}

/**
 * An ending's message as requests see it. A violation's detail quotes the offending output, which
 * may be another session's (the process is shared): it goes to the log only.
 */
function requestMessage(reason: ExitReason, message: string): string {
  return reason === "framing_violation" ? FRAMING_BROKEN : message;
}

/**
 * `node` → this Node binary; relative paths that exist under `baseDir` → absolute, because the
 * child runs in its private directory (docs/configuration.md: relative paths resolve from the
 * process working directory).
 */
export function resolveCommand(command: readonly string[], baseDir: string): string[] {
  if (command.length === 0 || !command[0]) throw new Error("harness command is empty");
  return command.map((arg, i) => {
    if (i === 0 && arg === "node") return process.execPath;
    if (arg.startsWith("-") || isAbsolute(arg) || (i === 0 && !arg.includes("/"))) return arg;
    const abs = resolve(baseDir, arg);
    return existsSync(abs) ? abs : arg;
  });
}

/**
 * `{type:"assistant.delta", session, turn, text}` with exactly these keys and valid values: what
 * AssistantDeltaEventSchema accepts, without zod's per-line allocations. Anything else (including
 * every malformed delta) goes through the schema, which names the problem.
 */
function isPlainDelta(v: Record<string, unknown>): v is AssistantDeltaEvent {
  if (v.type !== "assistant.delta") return false;
  const { session, turn, text } = v;
  let keys = 0;
  for (const _ in v) keys++;
  return (
    keys === 4 &&
    typeof text === "string" &&
    typeof session === "string" && session.length >= 1 && session.length <= MAX_ID_CHARS &&
    typeof turn === "string" && turn.length >= 1 && turn.length <= MAX_ID_CHARS
  );
}

/**
 * A process's private directory goes: for a user of its own, by the user's release, which kills
 * everything still running as it first (so nothing writes into the directory while it is removed)
 * and removes the directory itself — once the id is free, that path may already be another
 * process's. What fails is logged, never thrown: the runner-host serves every other tenant.
 */
async function removePrivate(dir: string | undefined, ownUid: number | undefined, logError: (msg: string, fields: Record<string, unknown>) => void): Promise<void> {
  if (ownUid !== undefined) await harnessUsers().release(ownUid).catch((err: Error) => logError("harness user not released", { error: err.message }));
  else if (dir !== undefined) await rm(dir, { recursive: true, force: true }).catch((err: Error) => logError("harness directory not removed", { error: err.message, dir }));
}

let users: HarnessUsers | undefined;

/** This runner-host's harness users (`SVC_HARNESS_UIDS`), made on first use. */
function harnessUsers(): HarnessUsers {
  users ??= new HarnessUsers(harnessUidRange(process.env.SVC_HARNESS_UIDS));
  return users;
}
