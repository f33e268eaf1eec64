/**
 * One attached session on the runner-host: its link (one lease), its configuration and cached
 * native state, and its turns, one at a time.
 *
 * Owns the session's native records (restored + appended): a session that left its harness
 * process (eviction to make room, a recycle for a new key) is re-opened from them without asking
 * the object. Leaving the runner-host (object `detach`, idle or LRU drop, harness crash, shutdown)
 * ends with `detached`, acked or not within `DETACH_ACK_MS`, then the link closes.
 *
 * Lifecycle (one `Life` value, never a set of flags):
 *
 *   attached ─open─▶ receiving ─last native part─▶ opening ─settled─▶ ready
 *   attached ─open with no native parts─▶ opening
 *   any of them ─detach, lost lease, harness exit, shutdown─▶ leaving (final)
 *
 * Turns queue beside it (`#runs`, `#turn`): a run waits for the open to settle and fails if the
 * session was never opened. While leaving, an `open` or a native part is ignored: opening now could
 * only be cancelled.
 */
import type { LinkDown, ProviderGrant } from "../src/shared/runner-protocol.ts";
import { STATE_FORMAT, type CommandInput, type Effort, type NativeRecord } from "./harness/protocol.ts";
import { CancelledError, type HarnessPool, type PoolSession } from "./harness-pool.ts";
import { SessionLink, type AppliedDown, type LinkOptions } from "./link.ts";
import type { Logger } from "./log.ts";
import type { SessionTools, ToolRoute } from "./turn-tools.ts";
import { SessionCredentials } from "./tools/credentials.ts";
import { RuntimeReplies } from "./tools/runtime-tool.ts";
import { Turn, type TurnEnd } from "./turn.ts";
import { tenantMessage } from "./error-text.ts";
import type { HostTool } from "../src/shared/config-schema.ts";
import type { ToolEnv } from "./tools/types.ts";

/** How long `detached` may wait for its ack before the link closes anyway, ms. */
const DETACH_ACK_MS = 5_000;
/**
 * How long a session leaving at a shutdown waits for its running turn to end before ending it
 * itself, ms: every process is stopped right after. Any other leave waits for the turn, which a
 * harness ignoring the interrupt ends by being killed (turn.ts INTERRUPT_GRACE_MS).
 */
const SHUTDOWN_TURN_MS = 5_000;

type Open = Extract<LinkDown, { t: "open" }>;
type Run = Extract<LinkDown, { t: "run" }>;
/** How the harness open ended: undefined when it succeeded, else why it failed. */
type Opened = Promise<string | undefined>;

type Life =
  /** Waiting for the object's `open`. */
  | { at: "attached" }
  /** `open` came; `partsLeft` native parts are still on their way. */
  | { at: "receiving"; open: Open; partsLeft: number }
  /** Being opened in a harness process (it may wait for capacity). */
  | { at: "opening"; open: Open; opened: Opened; abort: AbortController }
  /** The open settled, successfully or not (`opened` says which). */
  | { at: "ready"; open: Open; opened: Opened }
  /**
   * On its way out; `override` ends the turns it refuses from now on (shutdown). `yielded`: a
   * make-room drop, whose refused runs get no `turn_end` (the object queues them again).
   */
  | { at: "leaving"; open?: Open; opened?: Opened; left: Promise<void>; override?: TurnEnd; yielded?: true };

export type SessionRunnerOptions = {
  name: string;
  lease: number;
  harness: string;
  link: Pick<LinkOptions, "baseUrl" | "secret" | "runnerId" | "giveUpMs">;
  pool: HarnessPool;
  hostTools: ReadonlyMap<string, HostTool>;
  toolEnv: ToolEnv;
  publicUrl: string;
  log: Logger;
  /** Records the newest grant per prefix, for processes started later. */
  noteGrant(g: ProviderGrant): void;
  /**
   * Every provider key this runner-host has handed to harness processes: a process this session
   * shares (another provider's session, a spare started with every key seen) may hold any of them.
   */
  keys(): Iterable<string>;
  /** Idle/busy or attached state changed (capacity). */
  onChange(): void;
  /** The session is no longer on this runner-host. */
  onGone(s: SessionRunner): void;
};

export class SessionRunner implements PoolSession {
  readonly name: string;
  readonly lease: number;
  readonly harness: string;
  readonly link: SessionLink;
  lastUsed = Date.now();
  /** A turn of this attachment has ended: what the object placed the session for was served. */
  ranTurn = false;
  readonly #o: SessionRunnerOptions;
  #life: Life = { at: "attached" };
  #grant: ProviderGrant | undefined;
  #records: NativeRecord[] = [];
  #runs: Run[] = [];
  #turn: Turn | undefined;
  readonly #tools: SessionTools & { credentials: SessionCredentials };

  constructor(o: SessionRunnerOptions) {
    this.#o = o;
    this.name = o.name;
    this.lease = o.lease;
    this.harness = o.harness;
    this.link = new SessionLink({
      ...o.link,
      session: o.name,
      lease: o.lease,
      log: o.log,
      onDown: (m) => this.#onDown(m),
      onLive: (m) => this.#tools.credentials.answer(m),
      onConnected: () => this.#tools.credentials.askAgain(),
      onLost: (reason) => void this.#leave(reason, false),
    });
    const credentials = new SessionCredentials((callId) => this.link.sendLive({ t: "credential", call_id: callId }));
    this.#tools = { replies: new RuntimeReplies(), credentials, credential: (callId, signal) => credentials.ask(callId, signal) };
  }

  get key(): string {
    return this.#open?.session_id ?? this.name;
  }
  get tenant(): string {
    return this.#open!.tenant;
  }
  /** Its open settled, nothing running or waiting, not leaving: what an LRU or idle drop may take. */
  get idle(): boolean {
    return this.#life.at === "ready" && this.#turn === undefined && this.#runs.length === 0;
  }
  get leaving(): boolean {
    return this.#life.at === "leaving";
  }
  get currentTurn(): Turn | undefined {
    return this.#turn;
  }

  start(): void {
    this.link.start();
  }

  grant(): ProviderGrant {
    return this.#grant!;
  }

  openCommand(): Omit<CommandInput<"open">, "op" | "session"> {
    const o = this.#open!;
    return {
      model: o.model,
      ...(o.instructions !== undefined ? { instructions: o.instructions } : {}),
      ...(o.reasoning_effort !== undefined ? { reasoning_effort: o.reasoning_effort as Effort } : {}),
      tools: o.tools.map(({ name, description, input_schema }) => ({ name, description, input_schema })),
      ...(this.#records.length > 0 ? { state: { format: STATE_FORMAT, v: 1, records: this.#records } } : {}),
    };
  }

  harnessLost(message: string): void {
    this.#turn?.end({ status: "failed", error: { code: "service_error", message } });
    void this.#leave("the harness process exited", true);
  }

  /** Leaves the runner-host: the running turn ends with `override` (shutdown), then `detached`. */
  shutdown(reason: string, override?: TurnEnd): Promise<void> {
    return this.#leave(reason, true, override);
  }

  /**
   * Lets an idle session go to make room (`limits.loaded`; the caller chose it for being `idle`).
   * Nothing runs here after this: a `run` already on its way is dropped, not ended, and `detached`
   * says `yielded` so the object queues that turn again for its next placement (it never ran).
   */
  yieldRoom(reason: string): Promise<void> {
    return this.#leave(reason, true, undefined, true);
  }

  /** Leaves without telling the object (its lease was superseded). */
  abandon(reason: string): Promise<void> {
    return this.#leave(reason, false);
  }

  #onDown(m: AppliedDown): void {
    switch (m.t) {
      case "open":
        if (this.#open) return this.#o.log("warn", "second open on one lease ignored", { session: this.name });
        if (this.#life.at === "leaving") return;
        this.#setGrant(m.provider);
        if (m.native_parts === 0) return this.#openInHarness(m);
        this.#life = { at: "receiving", open: m, partsLeft: m.native_parts };
        return;
      case "native": {
        const life = this.#life;
        if (life.at === "leaving") return;
        if (life.at !== "receiving") return this.#o.log("warn", "native part outside an open ignored", { session: this.name });
        this.#records.push(...(m.records as NativeRecord[]));
        if (--life.partsLeft === 0) this.#openInHarness(life.open);
        return;
      }
      case "run":
        if (this.#life.at === "leaving") {
          if (this.#life.yielded) return; // `detached` tells the object it never ran
          const end = this.#life.override ?? { status: "interrupted", error: { code: "conflict", message: "the session is leaving this runner-host" } };
          return void this.link.send({ t: "turn_end", turn: m.turn, ...end });
        }
        this.#runs.push(m);
        this.#o.onChange();
        if (!this.#turn) void this.#nextTurn();
        return;
      case "interrupt":
        return this.#interrupt(m.turn);
      case "tool_reply":
        return this.#tools.replies.deliver(m.call_id, m.result);
      case "detach":
        return void this.#leave(`detach requested: ${m.reason}`, true);
    }
  }

  #setGrant(g: ProviderGrant): void {
    this.#grant = g;
    this.#o.noteGrant(g);
  }

  #openInHarness(open: Open): void {
    const abort = new AbortController();
    // The state comes first: the pool may ask for `openCommand()` before `open` returns.
    const { promise: opened, resolve } = Promise.withResolvers<string | undefined>();
    this.#life = { at: "opening", open, opened, abort };
    const outcome = this.#o.pool.open(this, abort.signal).then(
      () => {
        this.link.send({ t: "opened" });
        this.lastUsed = Date.now();
        return undefined;
      },
      (err: Error) => {
        if (!(err instanceof CancelledError)) this.link.send({ t: "open_failed", message: tenantMessage(err.message, this.#secrets()) });
        return err.message;
      },
    );
    resolve(outcome);
    void opened.then(() => {
      if (this.#life.at === "opening") this.#life = { at: "ready", open, opened };
      this.#o.onChange();
    });
  }

  /** The `open` of this lease, once it came. */
  get #open(): Open | undefined {
    return this.#life.at === "attached" ? undefined : this.#life.open;
  }

  /** The harness open, once started. */
  get #opened(): Opened | undefined {
    return this.#life.at === "opening" || this.#life.at === "ready" || this.#life.at === "leaving" ? this.#life.opened : undefined;
  }

  #interrupt(turn: string): void {
    if (this.#turn?.id === turn) return this.#turn.interrupt();
    const i = this.#runs.findIndex((r) => r.turn === turn);
    if (i < 0) return; // already ended: nothing to stop
    const [run] = this.#runs.splice(i, 1);
    this.link.send({ t: "turn_end", turn: run!.turn, status: "interrupted", error: { code: "conflict", message: "the turn was interrupted before it started" } });
  }

  async #nextTurn(): Promise<void> {
    const run = this.#runs.shift();
    if (!run) return;
    this.#setGrant(run.provider);
    const turn = new Turn({
      turn: run.turn,
      key: this.key,
      link: this.link,
      route: (name) => this.#route(name),
      session: this.#tools,
      env: this.#o.toolEnv,
      scope: { tenant_id: this.#open?.tenant ?? "", session_id: this.#open?.session_id ?? "", service_url: this.#o.publicUrl },
      secret: this.#o.link.secret,
      traceparent: run.traceparent,
      acceptedAt: run.accepted_at,
      log: this.#o.log,
      onNative: (records) => this.#records.push(...(records as NativeRecord[])),
      secrets: () => this.#secrets(),
    });
    this.#turn = turn;
    const failed = this.#opened ? await this.#opened : "the session was never opened";
    if (failed !== undefined) {
      turn.end({ status: "failed", error: { code: "service_error", message: failed } });
    } else {
      try {
        const slot = await this.#o.pool.acquireTurn(this, turn.signal);
        void turn.start(slot, run.text);
        void turn.done.then(() => slot.release());
      } catch (err) {
        const cancelled = err instanceof CancelledError;
        const error = cancelled
          ? ({ code: "conflict", message: "the turn was interrupted before it started" } as const)
          : ({ code: "service_error", message: (err as Error).message } as const);
        turn.end({ status: cancelled ? "interrupted" : "failed", error });
      }
    }
    await turn.done;
    this.#turn = undefined;
    this.ranTurn = true;
    this.lastUsed = Date.now();
    this.#o.onChange();
    if (this.#life.at === "leaving") return;
    void this.#nextTurn();
  }

  /**
   * The provider keys a harness process of this session may hold: never part of what its tenant
   * reads. The session's own grant is among them (`#setGrant` notes it).
   */
  #secrets(): Iterable<string> {
    return this.#o.keys();
  }

  #route(name: string): ToolRoute {
    const descriptor = this.#open?.tools.find((t) => t.name === name);
    if (!descriptor) return { kind: "harness" };
    const bound = this.#open!.routes?.find((r) => r.tool === name);
    if (bound?.runtime) return { kind: "runtime", descriptor };
    const tool = this.#o.hostTools.get(name);
    if (tool && tool.tenants.includes(this.#open!.tenant)) {
      return { kind: "host", tool, ...(bound?.parameters ? { parameters: bound.parameters } : {}), credential: bound?.credential === true };
    }
    if (!tool) return { kind: "refused", message: `tool ${name} is not configured on this runner-host` };
    return { kind: "refused", message: `tool ${name} is not enabled for this session's tenant` };
  }

  /**
   * Ends everything here. `tell`: the object still listens (send `detached` and wait for its
   * ack); false when the lease is already gone.
   */
  #leave(reason: string, tell: boolean, override?: TurnEnd, yielded?: true): Promise<void> {
    const from = this.#life;
    if (from.at === "leaving") {
      from.override ??= override;
      return from.left;
    }
    const { promise: left, resolve } = Promise.withResolvers<void>();
    this.#life = { at: "leaving", open: this.#open, opened: this.#opened, left, ...(override ? { override } : {}), ...(yielded ? { yielded } : {}) };
    // An open still waiting for capacity is not wanted any more (a turn may wait on it).
    if (from.at === "opening") from.abort.abort();
    resolve(this.#depart(reason, tell, this.#life.opened, override, yielded));
    return left;
  }

  async #depart(reason: string, tell: boolean, opened: Opened | undefined, override: TurnEnd | undefined, yielded?: true): Promise<void> {
    this.#o.onChange();
    const end: TurnEnd = override ?? { status: "interrupted", error: { code: "conflict", message: "the turn was interrupted" } };
    for (const run of this.#runs.splice(0)) this.link.send({ t: "turn_end", turn: run.turn, ...end });
    const turn = this.#turn;
    if (turn) {
      turn.interrupt(end);
      // Ending the turn here would disarm its watchdog while the harness still ran it, and the
      // session, taken for gone, would be opened again into the same process ("already open").
      const timer = override ? setTimeout(() => turn.end(end), SHUTDOWN_TURN_MS) : undefined;
      await turn.done;
      clearTimeout(timer);
    }
    await opened;
    await this.#o.pool.evict(this);
    if (tell) {
      // Only a shutdown passes an override: the object ends what still waits in its queue.
      this.link.send({ t: "detached", reason, ...(yielded ? { yielded } : {}), ...(override ? { shutdown: true as const } : {}) });
      await this.link.waitAcked(DETACH_ACK_MS);
    }
    this.link.close(1000, "detached");
    this.#o.log("info", "session detached", { session: this.name, lease: this.lease, reason });
    this.#o.onGone(this);
  }
}
