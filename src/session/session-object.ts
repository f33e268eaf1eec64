/**
 * SessionObject: the single owner of one session (status, queue, event log, subscribers, runner
 * link). Thin: its request and response methods return Results (the notifications other objects
 * send it — `syncKick`, `runnerGone`, `shutdownWaiting` — return nothing) and delegate to
 * SessionState / Turns; after each committed change the object publishes the new events to live
 * subscribers (before any await, so publication order is commit order), drives the runner link,
 * and pushes its summary to the TenantObject.
 *
 * Storage layout: the SQLite tables of migrations/session (SessionState's: metadata, queue, event
 * log, turns, bindings, sync state), plus one key-value entry, `home_region`, written at creation.
 * Lifecycle: memory holds only live subscribers, the runner link and caches, so everything else
 * survives eviction; a closed session keeps its state, readable, for good.
 *
 * Object name: `<session id>:<tenant>`, so another tenant's id maps to a different, empty object
 * and looks unknown (404).
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import type { Event, EventList, Input, Session, Status } from "../shared/api-schema.ts";
import { asResult, asResultAsync, conflict, ERROR_STATUS, overloaded, unauthorized, type Result } from "../shared/errors.ts";
import { LEASE_GONE_CLOSE_CODE, parseLinkUp, PING, PONG, type BatchItem, type NumberedUp } from "../shared/runner-protocol.ts";
import { log } from "../log.ts";
import { scheduleExport } from "../metrics/exporter.ts";
import { metrics } from "../metrics/registry.ts";
import { getRuntime } from "../runtime.ts";
import { placementOrder } from "../runner/fleet.ts";
import { configuredRegions, poolName } from "../runner/pool-name.ts";
import { DEFAULT_REGION, type HostConfig } from "../shared/config-schema.ts";
import { migrate } from "../storage/migrate.ts";
import { SessionSync } from "../persistence/session-sync.ts";
import type { SyncStatus } from "../shared/sync-schema.ts";
import { sessionObjectName } from "./object-name.ts";
import type { LoggedEvent } from "./event-log.ts";
import { openMessages, providerGrant } from "./open-message.ts";
import { toSession, type NewSession } from "./record.ts";
import { RunnerLink } from "./runner-link.ts";
import { SessionState, type Change } from "./session-state.ts";
import { Subscribers } from "./subscribers.ts";
import { Turns, type Applied } from "./turns.ts";
import m0001 from "../../migrations/session/0001_init.sql";
import m0002 from "../../migrations/session/0002_turns.sql";
import m0003 from "../../migrations/session/0003_ended_calls.sql";
import m0004 from "../../migrations/session/0004_bindings.sql";
import m0005 from "../../migrations/session/0005_sync.sql";
import m0006 from "../../migrations/session/0006_runtime_results.sql";
import m0007 from "../../migrations/session/0007_sync_orphans.sql";
import m0008 from "../../migrations/session/0008_native_hash.sql";
import { RuntimeCalls } from "./runtime-calls.ts";
import type { TenantObject } from "../tenant/tenant-object.ts";
import type { Tool } from "../shared/api-schema.ts";
import type { ToolResult } from "../shared/result-schema.ts";

const MIGRATIONS = [m0001, m0002, m0003, m0004, m0005, m0006, m0007, m0008];

/** Retry delay for a tenant-index push that failed, ms. Only armed while the index is behind. */
const INDEX_RETRY_MS = 2_000;
/**
 * Shortest time between two tenant-index pushes of one session that nobody waits on (turn starts
 * and ends, a runner-host lost), ms. A list may show a busy session up to this much behind; a
 * quiet session's change is pushed at once. Creates, closes, resumes, restores, loads and
 * rebinds are pushed before they are answered, whatever the interval.
 */
export const INDEX_INTERVAL_MS = 1_000;
/**
 * How long a dropped runner link may stay away while work is pending before the turn fails, ms:
 * long enough for a runner-host to reconnect after a deploy or object restart, short enough that
 * a lost runner-host surfaces quickly.
 */
export const LINK_GRACE_MS = 10_000;
/** Storage key of the session's home region (kept beside the SQL tables; fixed at creation). */
const HOME_REGION_KEY = "home_region";

export { sessionObjectName };

export class SessionObject extends DurableObject<Env> {
  readonly #state: SessionState;
  readonly #subs: Subscribers;
  readonly #turns: Turns;
  readonly #link: RunnerLink;
  readonly #runtime: RuntimeCalls;
  readonly #sync: SessionSync;
  /** When this instance last pushed to the tenant index (ms since epoch; 0: not yet). */
  #lastIndexPush = 0;
  #tenantStub: { tenant: string; stub: DurableObjectStub<TenantObject> } | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage, MIGRATIONS);
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING, PONG));
    this.#state = new SessionState(ctx.storage);
    this.#subs = new Subscribers(ctx);
    this.#turns = new Turns(this.#state);
    this.#link = new RunnerLink(ctx, this.#state);
    this.#runtime = new RuntimeCalls(this.#state, this.#link, env);
    this.#sync = new SessionSync({ env, state: this.#state, arm: (at) => this.#armAlarm(at), keepAlive: (p) => ctx.waitUntil(p) });
    void ctx.blockConcurrencyWhile(() => this.#noticeLostLink());
  }

  /**
   * A new instance whose runner link was up has no socket: the process that held it stopped (a
   * crash, a restart longer than the runner-host waits), and `webSocketClose` never ran. The link
   * gets the grace period a dropped socket gets; a runner-host that dials back in time keeps it.
   * A link still `requested` has not been dialled yet, which is not a loss.
   */
  async #noticeLostLink(): Promise<void> {
    const row = this.#state.row();
    if (!row || (row.link_state !== "opening" && row.link_state !== "open") || row.link_lost_at || this.#link.socket()) return;
    this.#state.set({ link_lost_at: Date.now() });
    await this.#armAlarm(Date.now() + LINK_GRACE_MS);
  }

  /** `region`: the home region the Worker chose (the object was created near it). */
  async create(n: NewSession, region: string = DEFAULT_REGION): Promise<Result<Session>> {
    const r = await asResultAsync(async () => {
      if (!this.#state.row()) await this.#sync.admit(sessionObjectName(n.tenant, n.id));
      return this.#state.create(n, now());
    });
    if (r.ok) {
      this.ctx.storage.kv.put(HOME_REGION_KEY, region);
      await this.#pushIndex(true);
    }
    return r;
  }

  /** `inspectCall`: the read comes with an inspection token, valid only while that call is open. */
  get(inspectCall?: string): Result<Session> {
    return asResult(() => {
      const row = this.#state.require();
      this.#requireOpenCall(inspectCall);
      return toSession(row);
    });
  }

  /** Persistence (src/persistence): flush, sync status, restore, load, and the backlog's wake-up. */
  flush(): Promise<Result<SyncStatus>> {
    return asResultAsync(async () => {
      this.#state.require();
      return this.#sync.flush();
    });
  }

  syncStatus(): Result<SyncStatus> {
    return asResult(() => this.#sync.status());
  }

  async restore(checkpoint: string): Promise<Result<Session>> {
    const r = await asResultAsync(async () => {
      await this.#sync.restore(checkpoint, () => this.#link.release("restored from a checkpoint"));
      this.#subs.endAll("restored from a checkpoint");
      return toSession(this.#state.require());
    });
    if (r.ok) await this.#pushIndex(true);
    return r;
  }

  async load(tenant: string, id: string): Promise<Result<boolean>> {
    const r = await asResultAsync(() => this.#sync.load(tenant, id));
    if (r.ok && r.value) await this.#pushIndex(true);
    return r;
  }

  async syncKick(): Promise<void> {
    await this.#sync.kick();
  }

  /** `inspectCall`: the read comes with an inspection token, valid only while that call is open. */
  readEvents(after: string, limit: number, inspectCall?: string): Result<EventList> {
    return asResult(() => {
      this.#requireOpenCall(inspectCall);
      return this.#state.page(after, limit);
    });
  }

  async send(input: Input, traceparent?: string): Promise<Result<Event | Status>> {
    const rt = await getRuntime(this.env);
    const { limits } = rt.config;
    if (input.type === "user.message") {
      // A message that needs the session placed is refused up front when no runner-host can take it.
      const row = this.#state.row();
      if (row && row.link_state === "none" && !this.#turns.running()) {
        const rooms = await Promise.all(configuredRegions((await getRuntime(this.env)).config).map((r) => this.#pool(r).room(row.harness)));
        if (rooms.includes("full") && !rooms.includes("room")) {
          return { ok: false, error: overloaded("every runner-host is at its loaded-session limit").toBody() };
        }
      }
    }
    if (input.type === "user.message" && this.#state.row()?.status === "idle") {
      const r = this.#state.require();
      const admitted = await asResultAsync(() => this.#sync.admit(sessionObjectName(r.tenant, r.id)));
      if (!admitted.ok) return admitted;
    }
    const running = this.#turns.running()?.event_id;
    return this.#commit(false, () => {
      const change = this.#state.send(input, limits, now(), traceparent);
      if (input.type === "user.interrupt" && running && change.events.length > 0) {
        this.#link.push({ t: "interrupt", turn: running });
      }
      return change;
    });
  }

  async resume(): Promise<Result<Session>> {
    return this.#commit(true, () =>
      this.#state.storage.transactionSync(() => {
        const change = this.#state.resume(now());
        // Restored from the last completed checkpoint: the harness re-opens from that state.
        this.#turns.revertNative();
        this.#link.release("resumed from the last checkpoint");
        return change;
      }),
    );
  }

  async close(): Promise<Result<Status>> {
    const placing = this.#state.row()?.link_state === "requested";
    const r = await this.#commit(true, () =>
      this.#state.storage.transactionSync(() => {
        const change = this.#state.close(now());
        if (change.events.length > 0) {
          this.#link.release("session closed");
          this.#turns.closeCheckpoint(now());
        }
        return change;
      }),
    );
    if (placing && r.ok) await this.#withdrawPlacement();
    return r;
  }

  /** The session waited for a runner-host and needs none now: every region's pool forgets it. */
  async #withdrawPlacement(): Promise<void> {
    const row = this.#state.require();
    const name = sessionObjectName(row.tenant, row.id);
    const { config } = await getRuntime(this.env);
    await Promise.all(configuredRegions(config).map((region) => this.#pool(region).withdraw(name, row.lease)));
  }

  /** `POST /executors` with `session`: the runtime binding `alias` now routes to `executor`. */
  async rebind(alias: string, tools: Tool[], executor: string): Promise<Result<void>> {
    const r = asResult(() => this.#state.storage.transactionSync(() => this.#runtime.rebind(alias, tools, executor, now())));
    if (r.ok) await this.#pushIndex(true);
    return r;
  }

  /** ExecutorObject: a runtime call's result (or its unknown outcome); conflict when it ended. */
  runtimeReply(callId: string, result: ToolResult): Result<void> {
    return this.#runtime.reply(callId, result);
  }

  /** ExecutorObject: a runtime call's progress, published live; conflict when it ended. */
  runtimeProgress(callId: string, data: unknown): Result<void> {
    const e = this.#runtime.progress(callId, data, now());
    if (!e) return { ok: false, error: conflict("the call is not waiting for progress").toBody() };
    this.#subs.publish([e]);
    return { ok: true, value: undefined };
  }

  /** RunnerPool: the runner-host that held `lease` restarted or vanished. */
  async runnerGone(lease: number): Promise<void> {
    const row = this.#state.row();
    if (!row || row.lease !== lease || row.link_state === "none") return;
    this.#loseRunner("the runner-host running this session was lost");
    await this.#afterChange();
  }

  /**
   * RunnerPool, at the local stack's shutdown: the session still waits for a runner-host (its lease
   * never reached one), so its work ends as a shutdown ends it: `conflict` for each input, then
   * `interrupted`. A session that was placed meanwhile is left to its runner-host's drain.
   */
  async shutdownWaiting(lease: number, reason: string): Promise<void> {
    const row = this.#state.row();
    if (!row || row.lease !== lease || row.link_state !== "requested") return;
    const events = this.#state.storage.transactionSync(() => {
      this.#link.release(reason);
      return this.#state.endForShutdown(now(), reason);
    });
    this.#publish(events);
    await this.#afterChange();
  }

  /** SSE relays (`/subscribe`) and runner-host links (`/link`) connect here. */
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") return new Response(null, { status: 404 });
    if (url.pathname === "/link") return this.#link.accept(Number(url.searchParams.get("lease")));
    if (url.pathname !== "/subscribe") return new Response(null, { status: 404 });
    // limits.subscribers is counted across the deployment by the Worker (StreamGate), not here.
    const call = url.searchParams.get("call") ?? undefined;
    const r = asResult(() => {
      const row = this.#state.require();
      this.#requireOpenCall(call);
      return this.#state.positionOf(row, url.searchParams.get("after") ?? "");
    });
    if (!r.ok) return Response.json(r.error, { status: r.error.status ?? ERROR_STATUS[r.error.code] });
    return this.#subs.accept(r.value, call);
  }

  async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    const text = typeof message === "string" ? message : new TextDecoder().decode(message);
    if (this.#link.isRunnerSocket(ws)) return this.#onRunnerMessage(ws, text);
    if (!this.#subs.isSubscriber(ws)) return;
    const row = this.#state.row();
    if (!row) return ws.close(1011, "session is gone");
    this.#subs.onMessage(ws, text, {
      read: (seq, limit) => ({
        events: this.#state.log.read(seq, limit).map((l) => ({ seq: l.seq, event: this.#state.withCursor(row, l.seq, l.event) })),
        lastSeq: this.#state.log.lastSeq(),
      }),
      closed: () => row.status === "closed",
    });
  }

  async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    if (this.#subs.isSubscriber(ws)) {
      log("info", "event stream closed", { session_id: this.#state.row()?.id, code });
      return;
    }
    if (!this.#link.isRunnerSocket(ws)) return;
    const row = this.#state.row();
    if (!row || row.lease !== this.#link.leaseOf(ws) || row.link_state === "none" || this.#link.socket()) return;
    // The link may come back (a blip); if it does not within the grace period, the work fails.
    this.#state.set({ link_lost_at: Date.now() });
    await this.#armAlarm(Date.now() + LINK_GRACE_MS);
  }

  async alarm(): Promise<void> {
    const row = this.#state.row();
    if (row?.link_lost_at && !this.#link.socket()) {
      const due = row.link_lost_at + LINK_GRACE_MS;
      if (Date.now() >= due) {
        this.#loseRunner("the runner-host running this session was lost (its link did not come back)");
      } else {
        await this.#armAlarm(due);
      }
    }
    await this.#schedule();
    // The alarm is when a coalesced or failed push is due.
    await this.#pushIndex(true);
    await this.#sync.alarm();
  }

  #onRunnerMessage(ws: WebSocket, text: string): Promise<void> | void {
    const parsed = parseLinkUp(text);
    if (!parsed.success) {
      log("warn", "invalid runner link message", { session_id: this.#state.row()?.id });
      return ws.close(1008, "invalid link message");
    }
    if (this.#link.leaseOf(ws) !== this.#state.row()?.lease) return ws.close(LEASE_GONE_CLOSE_CODE, "lease is not current");
    const m = parsed.data;
    switch (m.t) {
      case "hello":
        return this.#hello(m.down);
      case "ack":
        return this.#link.acked(m.down, false);
      case "credential":
        return this.#runtime.credential(m.call_id).then((answer) => {
          // Straight to the socket: an override's plaintext is never stored with the link messages.
          if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(answer));
        });
      case "delta":
      case "progress": {
        const e = this.#turns.live(m, now());
        if (e) this.#subs.publish([e]);
        return;
      }
      case "batch":
        return this.#applyRunner(ws, m.msgs);
      default:
        return this.#applyRunner(ws, [m]);
    }
  }

  /**
   * Applies runner messages (one numbered message, or a `batch` frame's items, in order) in one
   * transaction: numbered ones once each (each in its own savepoint), live ones as events to
   * publish, acks. Then one ack up to the last seq, and one publication of everything, in order.
   */
  async #applyRunner(ws: WebSocket, items: BatchItem[]): Promise<void> {
    const { limits } = (await getRuntime(this.env)).config;
    const at = now();
    type Done = { out: (LoggedEvent | Event)[]; applied: { m: NumberedUp; a: Applied }[]; failed?: { m: NumberedUp; e: unknown }; gap?: true };
    const done = this.#state.storage.transactionSync((): Done => {
      const d: Done = { out: [], applied: [] };
      for (const m of items) {
        if (m.t === "ack") {
          this.#link.acked(m.down, false);
          continue;
        }
        if (m.t === "delta" || m.t === "progress") {
          const e = this.#turns.live(m, at);
          if (e) d.out.push(e);
          continue;
        }
        let a;
        try {
          a = this.#turns.apply(m, at, limits.session_bytes);
        } catch (e) {
          // That message alone was rolled back; what came before it in the frame stays applied.
          return { ...d, failed: { m, e } };
        }
        // Seqs in a frame are consecutive, so a gap can only be at its first new message.
        if (a === "gap") return { ...d, gap: true };
        if (a === "duplicate") continue;
        d.applied.push({ m, a });
        d.out.push(...a.events);
      }
      return d;
    });
    const last = items.findLast((m) => "seq" in m) as NumberedUp | undefined;
    this.#publish(done.out);
    if (done.failed) {
      // A local write failure (a record over 4 MiB, a full log, storage trouble): the turn fails
      // and the frame counts as applied, so the runner-host's resend is not retried forever.
      const { m, e } = done.failed;
      log("error", "could not record a runner message", { session_id: this.#state.row()?.id, t: m.t, error: String(e) });
      this.#state.set({ up_seq: Math.max(this.#state.require().up_seq, last!.seq) });
      this.#link.ackUp(ws, last!.seq);
      this.#loseRunner(`local write failure: ${e instanceof Error ? e.message : String(e)}`);
      await this.#afterChange();
      return;
    }
    if (done.gap) return ws.close(1008, "link sequence gap");
    if (last) this.#link.ackUp(ws, Math.min(last.seq, this.#state.require().up_seq));
    if (done.applied.length === 0) return;
    for (const { m } of done.applied) {
      if (m.t === "tool_call" && m.dispatched) await this.#runtime.dispatch(m.call.id, m.call.name, m.call.arguments);
    }
    const applied = done.applied.map((x) => x.a);
    if (applied.some((a) => a.detached)) this.#state.storage.transactionSync(() => this.#link.release("runner-host detached"));
    if (applied.some((a) => a.opened || a.next || a.detached)) await this.#schedule();
    if (applied.some((a) => a.events.length > 0)) await this.#pushIndex();
  }

  /** A (re)connected link: the first hello of a lease opens; a later one resends what is unacked. */
  async #hello(down: number): Promise<void> {
    const rt = await getRuntime(this.env);
    this.#state.set({ link_lost_at: null });
    if (this.#state.require().link_state === "requested") return this.#open();
    this.#link.acked(down, true, rt);
    // An input that arrived while the link was lost waited for it.
    await this.#schedule();
  }

  /** First hello of a lease: send what to open (config, provider key, native state). */
  async #open(): Promise<void> {
    const rt = await getRuntime(this.env);
    const row = this.#state.require();
    const messages = openMessages(rt, row, this.#turns);
    if ("error" in messages) {
      this.#loseRunner(messages.error);
      return this.#afterChange();
    }
    this.#state.storage.transactionSync(() => {
      this.#state.set({ link_state: "opening" });
      for (const m of messages) this.#link.push(m, rt);
    });
  }

  /** Moves work forward: places the session on a runner-host, or starts the next queued turn. */
  async #schedule(): Promise<void> {
    const row = this.#state.row();
    if (!row || row.status === "closed" || row.status === "interrupted" || row.status === "failed") return;
    if (!this.#turns.running() && !this.#turns.hasQueued()) return;
    if (row.link_state === "none") {
      const lease = this.#state.storage.transactionSync(() => this.#link.newLease());
      await this.#place(sessionObjectName(row.tenant, row.id), lease, row.harness, (await getRuntime(this.env)).config);
      return;
    }
    if (row.link_state !== "open" || this.#turns.running()) return;
    // The link is lost (its runner-host may be gone): the input waits, queued, for the runner-host
    // to dial back (hello starts it) or for the grace to run out (the session is placed anew). A
    // turn started now would fail with the link, though it never reached any runner-host.
    if (row.link_lost_at && !this.#link.socket()) return;
    const rt = await getRuntime(this.env);
    const model: string = JSON.parse(row.config).model;
    const grant = providerGrant(rt, model);
    const events = this.#state.storage.transactionSync(() => {
      const s = this.#turns.start(now());
      if (!s) return [];
      if (!grant) {
        // The key vanished from the environment since creation: the turn cannot run.
        const message = `the key of provider "${model.split("/")[0]}" is not available`;
        return [...s.events, ...this.#state.endWork(now(), "failed", { running: { code: "service_error", message }, queued: "the session failed" })];
      }
      this.#link.push({
        t: "run",
        turn: s.input.event_id,
        text: s.input.text,
        traceparent: s.input.traceparent ?? undefined,
        accepted_at: Date.parse(s.input.accepted_at),
        provider: grant,
      }, rt);
      return s.events;
    });
    if (events.length > 0) {
      this.#publish(events);
      await this.#pushIndex();
    }
  }

  /**
   * Places the session in its home region's pool; where no runner-host there serves its harness
   * (they all left, or never came), in the next region that has one; if none has, it waits in the
   * home pool for a runner-host to connect.
   */
  async #place(name: string, lease: number, harness: string, config: HostConfig): Promise<void> {
    const order = placementOrder(config, this.ctx.storage.kv.get<string>(HOME_REGION_KEY) ?? DEFAULT_REGION);
    for (const region of order) {
      if ((await this.#pool(region).place(name, lease, harness, false)) !== "none") return;
    }
    await this.#pool(order[0]!).place(name, lease, harness, true);
  }

  /** The TenantObject's stub, made once per instance: naming an object hashes its name. */
  #tenantIndex(tenant: string) {
    if (this.#tenantStub?.tenant !== tenant) this.#tenantStub = { tenant, stub: this.env.TENANTS.getByName(tenant) };
    return this.#tenantStub.stub;
  }

  #pool(region: string) {
    return this.env.RUNNERS.getByName(poolName(region));
  }

  /** The runner-host is gone: a running turn fails, the lease is dropped. */
  #loseRunner(message: string): void {
    const events = this.#state.storage.transactionSync(() => {
      const out = this.#turns.running()
        ? this.#state.endWork(now(), "failed", { running: { code: "service_error", message }, queued: "the session failed" })
        : [];
      this.#link.release(message);
      return out;
    });
    this.#publish(events);
  }

  async #afterChange(): Promise<void> {
    await this.#schedule();
    await this.#pushIndex();
  }

  /**
   * Runs a state change, publishes what it appended, moves work on, updates the tenant index
   * (`urgent`: before answering, whatever the push interval).
   */
  async #commit<T>(urgent: boolean, fn: () => Change<T>): Promise<Result<T>> {
    return asResultAsync(async () => {
      const change = fn();
      this.#publish(change.events);
      await this.#schedule();
      if (change.events.length > 0) await this.#pushIndex(urgent);
      return change.value;
    });
  }

  /** Publishes, in order, events the log recorded (with cursors) and live-only ones. */
  #publish(out: (LoggedEvent | Event)[]): void {
    if (out.length === 0) return;
    const events = out.filter((x): x is LoggedEvent => "seq" in x);
    const row = this.#state.require();
    this.#subs.publish(out.map((x) => ("seq" in x ? this.#state.withCursor(row, x.seq, x.event) : x)));
    if (events.length === 0) return;
    metrics.counter("svc.transcript.bytes").add(events.reduce((n, l) => n + l.bytes, 0));
    scheduleExport(this.env, (p) => this.ctx.waitUntil(p));
    // Streams opened with an inspection token end with their tool call; executors stop working on it.
    const ended = events.filter((l) => l.event.type === "tool.result").map((l) => String(l.event.data.call_id));
    for (const id of ended) this.#subs.endCall(id);
    if (ended.length > 0) this.#runtime.ended(ended);
    if (row.status === "closed") this.#subs.endLive();
  }

  #requireOpenCall(call: string | undefined): void {
    if (call === undefined) return;
    const ended = this.#state.storage.sql.exec("SELECT 1 FROM ended_calls WHERE call_id = ?", call).toArray().length > 0;
    if (ended) throw unauthorized("the inspection token's tool call has ended");
  }

  async #armAlarm(at: number): Promise<void> {
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > at) await this.ctx.storage.setAlarm(at);
  }

  /**
   * Pushes the current summary to the tenant index; on failure an alarm retries until it lands.
   * Pushes are at least INDEX_INTERVAL_MS apart unless `urgent`: a change inside the interval is
   * left to an alarm at its end, which pushes whatever the row is then (one push for a turn's
   * `running` and `idle`, or for a burst of turns). What is owed is durable (`indexed_version` <
   * `version`), so an eviction before that alarm only delays the push to the object's next wake.
   */
  async #pushIndex(urgent = false): Promise<void> {
    await this.#sync.changed();
    const row = this.#state.row();
    if (!row || row.indexed_version >= row.version) return;
    const due = this.#lastIndexPush + INDEX_INTERVAL_MS;
    if (!urgent && Date.now() < due) return this.#armAlarm(due);
    this.#lastIndexPush = Date.now();
    try {
      await this.#tenantIndex(row.tenant).upsert(row.id, row.version, toSession(row), row.tenant);
      this.#state.markIndexed(row.version);
    } catch (e) {
      log("warn", "tenant index push failed", { session_id: row.id, error: String(e) });
      await this.#armAlarm(Date.now() + INDEX_RETRY_MS);
    }
  }
}

/**
 * The last timestamp made, by its millisecond: a frame of deltas stamps every event in the same
 * millisecond (workerd's clock stands still while a handler runs), and `toISOString` per event was
 * ~1% of workerd's CPU in a turn.
 */
let lastMs = NaN;
let lastIso = "";

function now(): string {
  const ms = Date.now();
  if (ms !== lastMs) [lastMs, lastIso] = [ms, new Date(ms).toISOString()];
  return lastIso;
}
