/**
 * The harness processes of one runner-host and who may use them (docs/configuration.md
 * "Harnesses", "Limits" `active`; docs/architecture.md "Where each concept lives").
 *
 * Owns: the processes per harness name, which session is resident (open) in which process, and
 * one FIFO of requests: "make this session resident" (an open) and "give this session a turn".
 * Invariants:
 * - A process holds sessions of ONE tenant (it is keyed by harness + tenant): whatever one
 *   tenant's session does to its process (a crash, a framing violation, a runaway), no other
 *   tenant's turn is in it.
 * - Per harness: at most `max_hosts` processes, `max_shared` resident sessions and
 *   `max_active_turns` running turns per process, `max_starting` opens in flight.
 * - `limits.active` bounds resident sessions on the runner-host (a running turn is always in a
 *   resident session). At a limit a request WAITS; it is never refused. To make room an idle
 *   resident session (least recently used) is detached, or an idle process stopped.
 * - Fairness across tenants: waiting requests are served round-robin by tenant (the tenant served
 *   longest ago first, each tenant's own requests in arrival order), and one tenant holds at most
 *   `limits.active` less a reserve (`tenantReserve`) resident sessions, so hung turns of one
 *   tenant can never take every slot from the others.
 * - A session only runs in a process started with its current provider grant. A changed key
 *   recycles the process when nothing runs in it, otherwise the session moves to another one.
 *   A session leaving a process stays cached by its owner and is re-opened lazily.
 * - The last detach closes the host: a process with no sessions is stopped.
 * - Spares (`spares` per harness, docs/configuration.md): started, `init`-answered processes that
 *   belong to no tenant yet. A new process for (harness, tenant) is a spare whose provider table
 *   matches the session's grant when there is one: it is bound to that tenant for good, and
 *   another spare is started behind it. A spare counts toward `max_hosts` and its start toward
 *   `max_starting`; it is the first process stopped to make room, is never started while a
 *   request of its harness waits, and is replaced when the runner-host sees a changed key. It is
 *   started with the grants seen so far, so there is none before the first session's grant.
 *   A taken spare's replacement starts once the session that took it ended its first turn, or
 *   `spareReplaceMs` after the take, whichever comes first, and so does a spare behind a process
 *   started for a session (a runner-host's first session: no spare before it): starting a process blocks this
 *   process's event loop while it forks (12–27 ms at 250 MiB, more the larger it is) and the new
 *   process then spends ~300 ms of CPU starting, both of which the new session's first output
 *   waited behind (bench/RESULTS.md "Thirteenth session").
 */
import type { Harness } from "../src/shared/config-schema.ts";
import type { ProviderGrant } from "../src/shared/runner-protocol.ts";
import type { HarnessExit, HarnessProcess } from "./harness/harness-process.ts";
import type { CommandInput, ResolvedModel } from "./harness/protocol.ts";
import type { Logger } from "./log.ts";
import { exitMessage, OpenError, PooledProcess, type ProviderTable } from "./pooled-process.ts";
import { telemetry } from "./telemetry.ts";

/** What the pool needs from a session; `SessionRunner` implements it. */
export interface PoolSession {
  /** Session id inside the harness. */
  readonly key: string;
  readonly harness: string;
  /** Its tenant: it only shares a process with sessions of the same tenant. */
  readonly tenant: string;
  /** The provider grant of the session's model as of its latest `open`/`run`. */
  grant(): ProviderGrant;
  /** Model, instructions, effort, tools and the cached native state. */
  openCommand(): Omit<CommandInput<"open">, "op" | "session">;
  /** Its process died while it was resident (not a stop the pool asked for). */
  harnessLost(message: string): void;
}

/** A granted turn: run it on `hp` (a process of `harness`), call `release` exactly when it ended. */
export type TurnSlot = { hp: HarnessProcess; harness: string; model: ResolvedModel; release(): void };

/**
 * Slots of `limits.active` one tenant can never hold, so another tenant's message can start while
 * that tenant's turns hang: an eighth, rounded up (2 of the default 16); none below 4, where a
 * reserve would cost a tenant too large a share, and none when the configuration names only one
 * tenant (there is nobody to keep them for).
 */
export function tenantReserve(active: number, tenants: number): number {
  return active < 4 || tenants < 2 ? 0 : Math.ceil(active / 8);
}

/**
 * Longest a taken spare's replacement waits for the session that took it to end its first turn,
 * ms: a real model's first turn lasts seconds, and its first output, the part worth keeping the
 * process start away from, comes well within one; the next new session finds a spare again at most
 * this much (plus a start) later than it would have.
 */
export const SPARE_REPLACE_MS = 1_000;

export class CancelledError extends Error {
  override name = "CancelledError";
}

export type PoolOptions = {
  harnesses: Record<string, Harness>;
  activeLimit: number;
  /** Distinct tenants the host configuration names (fairness needs at least two). */
  tenants: number;
  rootDir: string;
  baseDir?: string;
  log: Logger;
  /** Latest grant per prefix seen on this runner-host: a new process is started with all of them. */
  grants(): Iterable<ProviderGrant>;
  onChange?(): void;
  /** How long a harness command may take to be answered, ms (harness-process.ts's default unless set). */
  requestTimeoutMs?: number;
  /** SPARE_REPLACE_MS unless set (tests). */
  spareReplaceMs?: number;
};

type Residency = { proc: PooledProcess; open: boolean; model?: ResolvedModel; turn: boolean; lastUsed: number };
/** `busy`: an open or a move is in flight for it; `cancelled`: its signal fired meanwhile. */
type Entry = { s: PoolSession; turn: boolean; busy: boolean; cancelled: boolean; settle(v: TurnSlot | Error): void };

export class HarnessPool {
  readonly #o: PoolOptions;
  #procs = new Map<string, PooledProcess[]>();
  /**
   * Exits whose clean-up is still running (the harness user's release: what runs as it is killed,
   * its private directory removed): `stop` waits for them, or a runner-host that exits at once
   * leaves those directories behind.
   */
  readonly #cleaning = new Set<Promise<unknown>>();
  #where = new Map<PoolSession, Residency>();
  #queue: Entry[] = [];
  #starting = new Map<string, number>();
  /** Per tenant, the grant counter when it was last served: round-robin order. */
  #served = new Map<string, number>();
  #grants = 0;
  /** Harnesses whose last spare failed to start or ended unasked: no spares until one of their processes starts. */
  #spareFailed = new Set<string>();
  /**
   * Processes a session just took (a spare) or had started for it: the harness's spare starts wait
   * for that session's first turn's end (or the timer).
   */
  #spareHolds = new Map<PooledProcess, NodeJS.Timeout>();
  #pumping = false;
  #again = false;
  #stopped = false;

  constructor(o: PoolOptions) {
    this.#o = o;
  }

  /** Resident sessions (opening included): what `limits.active` bounds. */
  get active(): number {
    return this.#where.size;
  }
  get waiting(): number {
    return this.#queue.length;
  }
  processes(harness?: string): PooledProcess[] {
    return harness ? [...(this.#procs.get(harness) ?? [])] : [...this.#procs.values()].flat();
  }
  residentIn(s: PoolSession): PooledProcess | undefined {
    return this.#where.get(s)?.proc;
  }

  /** Makes the session resident; resolves with the resolved model, rejects with OpenError/CancelledError. */
  async open(s: PoolSession, signal?: AbortSignal): Promise<ResolvedModel> {
    return (await this.#enqueue(s, false, signal)).model;
  }

  /** Waits (in order) for the session to be resident with a free turn slot in a matching process. */
  acquireTurn(s: PoolSession, signal?: AbortSignal): Promise<TurnSlot> {
    return this.#enqueue(s, true, signal);
  }

  /** Detaches the session from its process if it is idle there (idle eviction, or it is leaving). */
  async evict(s: PoolSession): Promise<void> {
    const r = this.#where.get(s);
    if (!r || !r.open || r.turn) return;
    await this.#detach(s);
  }

  /** Stops every process and cancels every waiting request. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const t of this.#spareHolds.values()) clearTimeout(t);
    this.#spareHolds.clear();
    for (const e of this.#queue.splice(0)) e.settle(new CancelledError("the runner-host is shutting down"));
    this.#where.clear();
    await Promise.all([...this.processes().map((p) => p.stop()), ...this.#cleaning]);
  }

  #enqueue(s: PoolSession, turn: boolean, signal?: AbortSignal): Promise<TurnSlot> {
    if (this.#stopped) return Promise.reject(new CancelledError("the runner-host is shutting down"));
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        if (!this.#queue.includes(entry)) return; // already granted
        entry.cancelled = true;
        if (!entry.busy) this.#idle(entry); // else the open or move in flight settles it
      };
      const entry: Entry = {
        s,
        turn,
        busy: false,
        cancelled: false,
        settle: (v) => {
          signal?.removeEventListener("abort", onAbort);
          if (v instanceof Error) reject(v);
          else resolve(v);
        },
      };
      if (signal?.aborted) return reject(new CancelledError("cancelled before it was queued"));
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#queue.push(entry);
      this.#pump();
    });
  }

  #pump(): void {
    if (this.#pumping) return void (this.#again = true);
    this.#pumping = true;
    try {
      do {
        this.#again = false;
        this.#pass();
      } while (this.#again);
    } finally {
      this.#pumping = false;
    }
    this.#o.onChange?.();
  }

  /**
   * The queue in fair order: round by round, one request per tenant, tenants served longest ago
   * (or never) first; within a tenant, arrival order.
   */
  #fairOrder(): Entry[] {
    const byTenant = new Map<string, Entry[]>();
    for (const e of this.#queue) {
      const list = byTenant.get(e.s.tenant);
      if (list) list.push(e);
      else byTenant.set(e.s.tenant, [e]);
    }
    const tenants = [...byTenant.keys()].sort((a, b) => (this.#served.get(a) ?? -1) - (this.#served.get(b) ?? -1));
    const out: Entry[] = [];
    for (let round = 0; out.length < this.#queue.length; round++) {
      for (const t of tenants) {
        const e = byTenant.get(t)![round];
        if (e) out.push(e);
      }
    }
    return out;
  }

  #residentOf(tenant: string): number {
    let n = 0;
    for (const s of this.#where.keys()) if (s.tenant === tenant) n++;
    return n;
  }

  /** One walk of the queue in fair order, then the last-detach rule. */
  #pass(): void {
    let activeBlocked = false; // an earlier request waits for `limits.active`: later opens queue behind it
    const hostBlocked = new Set<string>();
    const queued = new Set(this.#queue.map((e) => e.s));
    const tenantCap = this.#o.activeLimit - tenantReserve(this.#o.activeLimit, this.#o.tenants);
    for (const e of this.#fairOrder()) {
      if (e.busy) continue;
      const r = this.#where.get(e.s);
      if (r) {
        if (r.open && r.proc.state === "ready") this.#tryGrant(e, r);
        continue; // opening, or its process is going away: wait for that to settle
      }
      const cfg = this.#o.harnesses[e.s.harness];
      if (!cfg) {
        this.#finish(e, new OpenError(`harness ${JSON.stringify(e.s.harness)} is not configured on this runner-host`));
        continue;
      }
      if (activeBlocked || (this.#starting.get(e.s.harness) ?? 0) >= cfg.max_starting) continue;
      const tenant = e.s.tenant;
      // At its share the tenant waits for one of its own sessions to go idle; others go on.
      if (this.#residentOf(tenant) >= tenantCap && !this.#evictIdle(queued, (r, s) => s.tenant === tenant)) continue;
      const grant = e.s.grant();
      const procs = this.#procs.get(e.s.harness) ?? [];
      let p = procs.find((p) => p.usable && p.tenant === tenant && p.matches(grant) && p.load < cfg.max_shared);
      const spare = p ? undefined : procs.find((p) => p.spare && p.usable && p.matches(grant));
      if (!p && !spare && procs.length >= cfg.max_hosts) {
        p = hostBlocked.has(e.s.harness) ? undefined : this.#makeRoom(procs, tenant, grant, queued);
        if (!p) {
          hostBlocked.add(e.s.harness);
          continue;
        }
      }
      if (this.active >= this.#o.activeLimit && !this.#evictIdle(queued)) {
        activeBlocked = true;
        continue;
      }
      if (!p && spare) {
        spare.tenant = tenant; // for good: it holds this tenant's sessions only from now on
        p = spare;
        this.#o.log("info", "spare harness process taken", { harness: e.s.harness, pid: spare.pid });
        this.#holdSpares(spare);
      }
      if (!p) {
        p = this.#spawn(e.s.harness, tenant, grant);
        // Started for a session, it holds back the harness's spare starts as a taken spare does:
        // the first session of a runner-host (before it no key was known to start a spare with).
        if (cfg.spares > 0) this.#holdSpares(p);
      }
      this.#openIn(e, p);
    }
    for (const p of this.processes()) {
      if (!p.spare && p.state === "ready" && p.load === 0 && p.running === 0) this.#stopProcess(p, "its last session was detached");
    }
    this.#keepSpares();
  }

  /** Replaces spares with stale keys, and starts spares up to `spares` where limits and waiters allow. */
  #keepSpares(): void {
    if (this.#stopped) return;
    const grants = [...this.#o.grants()];
    if (grants.length === 0) return; // no key seen yet: a spare could call no provider
    const waiting = new Set(this.#queue.map((e) => e.s.harness));
    for (const [harness, cfg] of Object.entries(this.#o.harnesses)) {
      const procs = this.#procs.get(harness) ?? [];
      for (const p of procs) {
        if (p.spare && p.usable && !grants.every((g) => p.matches(g))) this.#stopProcess(p, "provider key changed");
      }
      if (cfg.spares === 0 || waiting.has(harness) || this.#spareFailed.has(harness)) continue;
      if (this.#sparesHeld(harness)) continue;
      const live = (this.#procs.get(harness) ?? []).filter((p) => p.usable);
      let hosts = live.length;
      let spares = live.filter((p) => p.spare).length;
      let starting = (this.#starting.get(harness) ?? 0) + live.filter((p) => p.state === "starting").length;
      for (; spares < cfg.spares && hosts < cfg.max_hosts && starting < cfg.max_starting; spares++, hosts++, starting++) {
        this.#spawn(harness, undefined, grants[0]!);
      }
    }
  }

  #tryGrant(e: Entry, r: Residency): void {
    const p = r.proc;
    if (!p.matches(e.s.grant())) {
      if (p.running === 0 && p.opening === 0) return this.#stopProcess(p, "provider key changed");
      e.busy = true; // busy elsewhere: move this idle session to a process with the new key
      void this.#detach(e.s).finally(() => this.#idle(e));
      return;
    }
    if (!e.turn) return this.#finish(e, { hp: p.hp!, harness: p.harness, model: r.model!, release: () => {} });
    if (p.running >= this.#o.harnesses[p.harness]!.max_active_turns) return;
    p.running++;
    r.turn = true;
    let released = false;
    this.#finish(e, {
      hp: p.hp!,
      harness: p.harness,
      model: r.model!,
      release: () => {
        if (released) return;
        released = true;
        p.running--;
        r.turn = false;
        r.lastUsed = Date.now();
        if (this.#spareHolds.has(p)) return this.#releaseSpares(p); // pumps a moment later
        this.#pump();
      },
    });
  }

  #finish(e: Entry, v: TurnSlot | Error): void {
    const i = this.#queue.indexOf(e);
    if (i >= 0) this.#queue.splice(i, 1);
    if (!(v instanceof Error)) this.#served.set(e.s.tenant, ++this.#grants);
    e.settle(v);
  }

  #openIn(e: Entry, p: PooledProcess): void {
    const h = e.s.harness;
    const r: Residency = { proc: p, open: false, turn: false, lastUsed: Date.now() };
    this.#where.set(e.s, r);
    this.#starting.set(h, (this.#starting.get(h) ?? 0) + 1);
    this.#served.set(e.s.tenant, ++this.#grants); // a slot granted, though the open may still fail
    p.opening++;
    e.busy = true;
    p.open(e.s.key, e.s.openCommand()).then(
      (model) => {
        if (this.#where.get(e.s) === r) Object.assign(r, { open: true, model });
        else void p.detach(e.s.key); // forgotten meanwhile (its process is stopping, or the session left)
      },
      (err: Error) => {
        if (this.#where.get(e.s) === r) this.#where.delete(e.s);
        this.#finish(e, err instanceof OpenError ? err : new OpenError(err.message));
      },
    ).finally(() => {
      p.opening--;
      this.#starting.set(h, this.#starting.get(h)! - 1);
      this.#idle(e);
    });
  }

  /** Nothing is in flight for the entry any more: drop it if it was cancelled, and look again. */
  #idle(e: Entry): void {
    e.busy = false;
    if (e.cancelled) this.#finish(e, new CancelledError("cancelled while waiting for capacity"));
    this.#pump();
  }

  /**
   * Every process of the harness is full, of another tenant or has another key, and there may be
   * no more: detach an idle session from a matching process (room at once), else stop a process
   * with no running turn (room once it exited; the request waits for that).
   */
  #makeRoom(procs: PooledProcess[], tenant: string, grant: ProviderGrant, queued: Set<PoolSession>): PooledProcess | undefined {
    const matching = new Set(procs.filter((p) => p.state === "ready" && p.tenant === tenant && p.matches(grant)));
    if (this.#evictIdle(queued, (r) => matching.has(r.proc))) return [...matching].find((p) => p.load < this.#maxShared(p));
    // Not one a waiting request needs: a session just opened there waits for its turn, and
    // stopping its process for another tenant's (whose process the same rule would then stop for
    // it) started and stopped processes in a loop while neither turn ran.
    const waitedOn = new Set([...this.#where].filter(([s]) => queued.has(s)).map(([, r]) => r.proc));
    const idle = procs.find((p) => p.spare && p.usable) ?? procs.find((p) => p.state === "ready" && p.running === 0 && p.opening === 0 && !waitedOn.has(p));
    if (idle) this.#stopProcess(idle, "making room for another process of its harness");
    return undefined;
  }

  #maxShared(p: PooledProcess): number {
    return this.#o.harnesses[p.harness]!.max_shared;
  }

  /** Detaches the least recently used idle resident session nobody waits on (and `where` allows); false if none. */
  #evictIdle(queued: Set<PoolSession>, where: (r: Residency, s: PoolSession) => boolean = () => true): boolean {
    let victim: [PoolSession, Residency] | undefined;
    for (const entry of this.#where) {
      const [s, r] = entry;
      if (!r.open || r.turn || queued.has(s) || r.proc.state !== "ready" || !where(r, s)) continue;
      if (!victim || r.lastUsed < victim[1].lastUsed) victim = entry;
    }
    if (!victim) return false;
    this.#o.log("debug", "detaching an idle session to make room", { harness: victim[0].harness });
    void this.#detach(victim[0]);
    return true;
  }

  async #detach(s: PoolSession): Promise<void> {
    const r = this.#where.get(s);
    if (!r) return;
    this.#where.delete(s);
    await r.proc.detach(s.key);
    this.#pump();
  }

  #spawn(harness: string, tenant: string | undefined, grant: ProviderGrant): PooledProcess {
    const providers: ProviderTable = {};
    for (const g of this.#o.grants()) providers[g.prefix] = g;
    providers[grant.prefix] = grant;
    const p = new PooledProcess(
      {
        harness,
        tenant,
        command: this.#o.harnesses[harness]!.command,
        rootDir: this.#o.rootDir,
        baseDir: this.#o.baseDir,
        log: this.#o.log,
        ...(this.#o.requestTimeoutMs !== undefined ? { requestTimeoutMs: this.#o.requestTimeoutMs } : {}),
      },
      providers,
      (proc, exit, expected) => this.#onExit(proc, exit, expected),
    );
    this.#procs.set(harness, [...(this.#procs.get(harness) ?? []), p]);
    p.ready.then(
      () => {
        // Only a start for a session: a spare's own start would clear what its sibling's
        // unasked end just set, and spares would replace each other for good.
        if (!p.spare) this.#spareFailed.delete(harness);
        telemetry().runnerStartup(harness, p.hp!.startupMs);
        this.#o.log("info", "harness process started", { harness, pid: p.pid, engine: p.hp!.ready.engine, startup_ms: Math.round(p.hp!.startupMs), spare: p.spare });
        if (p.spare) this.#pump(); // a waiting request may take it now
      },
      () => {
        // A harness that cannot start would otherwise be respawned as a spare forever.
        if (p.spare) this.#spareFailed.add(harness);
      },
    );
    return p;
  }

  #stopProcess(p: PooledProcess, why: string): void {
    if (p.state === "stopping" || p.state === "gone") return;
    for (const [s, r] of this.#where) if (r.proc === p && r.open) this.#where.delete(s);
    this.#o.log("info", "stopping harness process", { harness: p.harness, pid: p.pid, why });
    void p.stop().finally(() => this.#pump());
  }

  /** The harness's spare starts wait for `p`'s session's first turn to end, or `spareReplaceMs`. */
  #holdSpares(p: PooledProcess): void {
    this.#spareHolds.set(p, setTimeout(() => this.#releaseSpares(p), this.#o.spareReplaceMs ?? SPARE_REPLACE_MS));
  }

  /**
   * `p`'s hold on its harness's spare starts ends. From an immediate, not at once: what the turn's end
   * queued (its `turn_end` on the link, also written from an immediate) leaves before the fork.
   */
  #releaseSpares(p: PooledProcess): void {
    if (this.#dropHold(p)) setImmediate(() => this.#pump());
  }

  /** Ends `p`'s hold on spare starts; true if it had one. */
  #dropHold(p: PooledProcess): boolean {
    const t = this.#spareHolds.get(p);
    if (t === undefined) return false;
    clearTimeout(t);
    this.#spareHolds.delete(p);
    return true;
  }

  /** Whether a process of this harness still holds its spare starts (on every pass: no copy). */
  #sparesHeld(harness: string): boolean {
    for (const p of this.#spareHolds.keys()) if (p.harness === harness) return true;
    return false;
  }

  #onExit(p: PooledProcess, exit: HarnessExit, expected: boolean): void {
    this.#dropHold(p); // the pass at the end starts the replacement
    const list = this.#procs.get(p.harness) ?? [];
    this.#procs.set(p.harness, list.filter((x) => x !== p));
    const cleaned = p.hp?.exited;
    if (cleaned) {
      this.#cleaning.add(cleaned);
      void cleaned.finally(() => this.#cleaning.delete(cleaned));
    }
    const message = exitMessage(exit);
    for (const [s, r] of this.#where) {
      if (r.proc !== p || !r.open) continue; // opening ones fail through their open
      this.#where.delete(s);
      if (!expected) s.harnessLost(message);
    }
    // A start that never made a process (no user id free, no binary) logged nothing of its own: its
    // reason, the runner-host's own words, goes here. A process that ran logged its exit itself.
    if (!expected) this.#o.log("warn", "harness process ended", { harness: p.harness, pid: p.pid, reason: exit.reason, ...(p.hp === undefined ? { message: exit.message } : {}) });
    // A spare that ends unasked (a harness that exits when it holds no session) would be replaced,
    // and end, forever: like one that fails to start, it waits for a process of its harness to start.
    if (!expected && p.spare) this.#spareFailed.add(p.harness);
    this.#pump();
  }
}
