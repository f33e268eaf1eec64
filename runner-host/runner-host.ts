/**
 * The runner-host: one control socket to RunnerPool, one link per attached session, and the
 * harness pool they share (docs/architecture.md).
 *
 * Owns: the attached sessions by object name, the newest provider grant per prefix, and the
 * `limits.loaded` bookkeeping: an attach order past the limit drops the least recently used idle
 * session (one attached for a turn it has not run yet only after YIELD_AFTER_MS); with none (or
 * while draining) the order is refused and the pool told why.
 * Idle sessions are detached from their harness process after `SESSION_IDLE_MS` (the last detach
 * closes the process) and let go of entirely after `SESSION_DROP_MS`.
 */
import { DEFAULT_REGION } from "../src/shared/config-schema.ts";
import type { RunnerConfig } from "../src/shared/runner-config-schema.ts";
import { newId } from "../src/shared/ids.ts";
import type { Capacity, ProviderGrant } from "../src/shared/runner-protocol.ts";
import { ControlClient, type AttachOrder, type ControlOptions } from "./control.ts";
import { HarnessPool } from "./harness-pool.ts";
import { log as defaultLog, type Logger } from "./log.ts";
import { SessionRunner } from "./session-runner.ts";
import { initTelemetry, type Telemetry } from "./telemetry.ts";
import type { TurnEnd } from "./turn.ts";
import type { HostTool } from "../src/shared/config-schema.ts";
import type { ToolEnv } from "./tools/types.ts";

/**
 * Idle time after which a session is detached from its harness process, ms. Five minutes covers
 * a user reading an answer and typing the next message (the next turn stays warm), and still
 * frees a process slot and its memory well before anyone would miss it.
 */
export const SESSION_IDLE_MS = 5 * 60_000;
/**
 * Idle time after which the runner-host lets go of a session entirely (`detached`), ms. Until
 * then its native state stays cached here, so a re-open needs no round trip to the object.
 */
export const SESSION_DROP_MS = 30 * 60_000;
/**
 * Quiet time before a session that has not run a turn since it was attached may be dropped to make
 * room (`limits.loaded`), ms. The object places a session because it has work and sends the `run`
 * right after `opened`: such a session is idle only until then. Dropping them for each other (each
 * one queued again by its yield) churned attaches every few ms under a burst at the limit. A
 * session that has run a turn is droppable as soon as it is idle (a `run` that crosses the drop is
 * covered by the yield).
 */
export const YIELD_AFTER_MS = 1_000;
/** How a turn running at shutdown ends (docs/api.md "Turns", "Shutdown and readiness"). */
const SHUTDOWN_END: TurnEnd = { status: "interrupted", error: { code: "conflict", message: "the service is shutting down" } };

export type RunnerHostOptions = {
  /** The service's base URL (`public_url` for `svc runner`, loopback for the local stack). */
  baseUrl: string;
  secret: string;
  /** Stable across restarts of this runner-host (persisted by the caller). */
  runnerId: string;
  /** A host configuration has these fields too (the local stack passes its own). */
  config: Pick<RunnerConfig, "public_url" | "harnesses" | "tools" | "limits">;
  /** The region announced to the service (default "default"). */
  region?: string;
  /** Connection events for the caller's health reporting and refusal policy (`svc runner`). */
  control?: Pick<ControlOptions, "onConnectionChange" | "onRefused" | "onUnreachable">;
  /** Each harness process gets a private directory under this one. */
  rootDir: string;
  /** Relative harness command paths resolve here (default: the working directory). */
  baseDir?: string;
  /** Where tool bearer tokens (`token_env`) are read at call time, and `OTEL_EXPORTER_OTLP_*` at start. */
  env?: ToolEnv;
  log?: Logger;
  sessionIdleMs?: number;
  sessionDropMs?: number;
  linkGiveUpMs?: number;
  /** YIELD_AFTER_MS unless set (tests). */
  yieldAfterMs?: number;
  /** How long a harness command may take to be answered, ms: DEFAULT_REQUEST_TIMEOUT_MS unless set (tests). */
  harnessRequestTimeoutMs?: number;
  /** SPARE_REPLACE_MS unless set (tests). */
  spareReplaceMs?: number;
};

export class RunnerHost {
  /** Random per process start: the pool learns that sessions of an older boot are gone. */
  readonly boot = newId();
  readonly pool: HarnessPool;
  readonly #o: RunnerHostOptions;
  readonly #log: Logger;
  readonly #control: ControlClient;
  readonly #hostTools: ReadonlyMap<string, HostTool>;
  #sessions = new Map<string, SessionRunner>();
  /** Announces sessions that became droppable once the quiet time passed (see `#changed`). */
  #aging: NodeJS.Timeout | undefined;
  #grants = new Map<string, ProviderGrant>();
  /** Every provider key handed out (a rotated one too: a process may still hold it). */
  #keys = new Set<string>();
  #draining: Promise<void> | undefined;
  #sweep: NodeJS.Timeout | undefined;
  #telemetry: Telemetry | undefined;

  constructor(o: RunnerHostOptions) {
    this.#o = o;
    this.#log = o.log ?? defaultLog;
    this.#hostTools = new Map(o.config.tools.map((t) => [t.name, t]));
    this.pool = new HarnessPool({
      harnesses: o.config.harnesses,
      activeLimit: o.config.limits.active,
      tenants: tenantCount(o.config),
      rootDir: o.rootDir,
      baseDir: o.baseDir,
      log: this.#log,
      grants: () => this.#grants.values(),
      onChange: () => this.#control.statusChanged(),
      ...(o.harnessRequestTimeoutMs !== undefined ? { requestTimeoutMs: o.harnessRequestTimeoutMs } : {}),
      ...(o.spareReplaceMs !== undefined ? { spareReplaceMs: o.spareReplaceMs } : {}),
    });
    this.#control = new ControlClient({
      baseUrl: o.baseUrl,
      secret: o.secret,
      runnerId: o.runnerId,
      boot: this.boot,
      harnesses: Object.keys(o.config.harnesses),
      region: o.region ?? DEFAULT_REGION,
      log: this.#log,
      ...o.control,
      state: () => ({ draining: this.draining, capacity: this.capacity() }),
      onAttach: (order) => this.#onAttach(order),
    });
  }

  get draining(): boolean {
    return this.#draining !== undefined;
  }
  get connected(): boolean {
    return this.#control.connected;
  }

  start(): void {
    this.#telemetry = initTelemetry(this.#o.env ?? process.env, this.#log);
    this.#control.start();
    const idleMs = this.#o.sessionIdleMs ?? SESSION_IDLE_MS;
    const dropMs = this.#o.sessionDropMs ?? SESSION_DROP_MS;
    // Checked four times per idle period: a session leaves between 1 and 1.25 periods after its last use.
    this.#sweep = setInterval(() => this.#sweepIdle(idleMs, dropMs), Math.max(10, Math.min(idleMs, dropMs) / 4));
    this.#sweep.unref();
  }

  capacity(): Capacity {
    const live = this.sessions();
    const now = Date.now();
    return { loaded: live.length, loaded_limit: this.#o.config.limits.loaded, idle: live.filter((s) => this.#droppable(s, now)).length };
  }

  /** Idle, and not waiting for the run it was placed for: may be dropped for another session (what `capacity().idle` counts). */
  #droppable(s: SessionRunner, now: number): boolean {
    return s.idle && (s.ranTurn || now - s.lastUsed >= (this.#o.yieldAfterMs ?? YIELD_AFTER_MS));
  }

  /**
   * A session's state changed: the status goes out now. At the loaded limit (the only time the pool
   * reads the idle count) it goes out again once the quiet time has passed, when sessions idle since
   * then have become droppable: nothing else would announce it. Below the limit a turn's start and
   * end arm no timer.
   */
  #changed(): void {
    this.#control.statusChanged();
    if (this.#sessions.size < this.#o.config.limits.loaded) return;
    clearTimeout(this.#aging);
    this.#aging = setTimeout(() => this.#control.statusChanged(), (this.#o.yieldAfterMs ?? YIELD_AFTER_MS) + 10);
    this.#aging.unref();
  }

  /** Attached sessions that are not on their way out. */
  sessions(): SessionRunner[] {
    return [...this.#sessions.values()].filter((s) => !s.leaving);
  }

  session(name: string): SessionRunner | undefined {
    return this.#sessions.get(name);
  }

  /**
   * Stops taking attach orders, ends running turns as interrupted by shutdown (waiting, bounded,
   * for the objects to ack them), detaches every session and stops the harness processes. The
   * control socket stays up (the pool sees `draining`) until `stop`.
   */
  drain(): Promise<void> {
    this.#draining ??= (async () => {
      this.#log("info", "runner-host draining", { sessions: this.#sessions.size });
      this.#control.statusChanged();
      clearInterval(this.#sweep);
      clearTimeout(this.#aging);
      await Promise.all([...this.#sessions.values()].map((s) => s.shutdown("the runner-host is shutting down", SHUTDOWN_END)));
      await this.pool.stop();
    })();
    return this.#draining;
  }

  async stop(): Promise<void> {
    await this.drain();
    this.#control.stop();
    await this.#telemetry?.shutdown(); // exports what the last turns recorded; never throws
  }

  #onAttach(order: AttachOrder): void {
    const { session, lease, harness } = order;
    if (this.draining) return this.#refuse(order, "draining");
    if (!Object.hasOwn(this.#o.config.harnesses, harness)) return this.#refuse(order, "unknown_harness");
    const old = this.#sessions.get(session);
    if (old && old.lease >= lease) {
      if (old.lease > lease) this.#log("warn", "stale attach order ignored", { session, lease, current: old.lease });
      return; // a repeated order for the lease it already holds
    }
    const live = this.sessions().filter((s) => s !== old);
    if (live.length >= this.#o.config.limits.loaded) {
      const now = Date.now();
      const victim = live.filter((s) => this.#droppable(s, now)).sort((a, b) => a.lastUsed - b.lastUsed)[0];
      if (!victim) return this.#refuse(order, "full");
      void victim.yieldRoom("dropped to make room (limits.loaded)");
    }
    const s = new SessionRunner({
      name: session,
      lease,
      harness,
      link: { baseUrl: this.#o.baseUrl, secret: this.#o.secret, runnerId: this.#o.runnerId, giveUpMs: this.#o.linkGiveUpMs },
      pool: this.pool,
      hostTools: this.#hostTools,
      toolEnv: this.#o.env ?? process.env,
      publicUrl: this.#o.config.public_url,
      log: this.#log,
      noteGrant: (g) => {
        this.#grants.set(g.prefix, g);
        this.#keys.add(g.key);
      },
      keys: () => this.#keys,
      onChange: () => this.#changed(),
      onGone: (gone) => {
        if (this.#sessions.get(gone.name) === gone) this.#sessions.delete(gone.name);
        this.#control.statusChanged();
      },
    });
    this.#sessions.set(session, s);
    this.#log("info", "session attached", { session, lease, harness });
    this.#control.statusChanged();
    // A superseded lease leaves first: the same session must not be open twice in one harness.
    if (old) void old.abandon("superseded by a newer lease").then(() => s.start());
    else s.start();
  }

  #refuse(order: AttachOrder, reason: "full" | "draining" | "unknown_harness"): void {
    this.#log("warn", "attach order refused", { session: order.session, lease: order.lease, reason });
    this.#control.send({ t: "attach_refused", session: order.session, lease: order.lease, reason });
    this.#control.statusChanged();
  }

  #sweepIdle(idleMs: number, dropMs: number): void {
    const now = Date.now();
    for (const s of this.sessions()) {
      if (!s.idle) continue;
      const idleFor = now - s.lastUsed;
      if (idleFor >= dropMs) void s.shutdown(`idle for ${Math.round(idleFor / 1000)} s`);
      else if (idleFor >= idleMs) void this.pool.evict(s);
    }
  }
}

/**
 * Distinct tenants the configuration names, for the fairness reserve. A runner-only configuration
 * names none (tokens stay with the Worker), so it is taken as shared by several tenants.
 */
function tenantCount(config: object): number {
  const tokens = (config as { tokens?: { tenant: string }[] }).tokens;
  return tokens ? new Set(tokens.map((t) => t.tenant)).size : 2;
}
