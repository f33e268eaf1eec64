/**
 * SessionObject: the single owner of one session (status, queue, event log, subscribers, runner
 * link). Thin: it wires the object's storage, sockets, alarm and bindings to plain modules; its
 * request and response methods return Results (the notifications other objects send it —
 * `syncKick`, `runnerGone`, `shutdownWaiting` — return nothing). Where the logic is:
 * - session-state.ts, turns.ts, runtime-calls.ts: state changes, each one transaction that returns
 *   the events it appended;
 * - scheduler.ts: what follows a committed change: the new events are published to live
 *   subscribers (publication.ts) before any await, so publication order is commit order; work
 *   moves on (placement.ts, or the next turn); the tenant index gets the summary (index-push.ts);
 * - runner-link.ts, runner-messages.ts, link-grace.ts: the runner link's numbering and sockets,
 *   what the runner-host's messages do, a lost link's grace;
 * - subscribers.ts: the SSE relays' sockets; src/persistence/session-sync.ts: persistence.
 *
 * Storage layout: the SQLite tables of migrations/session (SessionState's: metadata, queue, event
 * log, turns, bindings, sync state), plus one key-value entry, `home_region`, written at creation
 * (placement.ts).
 * Lifecycle: memory holds only live subscribers, the runner link and caches, so everything else
 * survives eviction; a closed session keeps its state, readable, for good.
 *
 * Object name: `<session id>:<tenant>`, so another tenant's id maps to a different, empty object
 * and looks unknown (404).
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import type { Event, EventList, Input, Session, Status, Tool } from "../shared/api-schema.ts";
import { asResult, asResultAsync, conflict, ERROR_STATUS, overloaded, unauthorized, type Result } from "../shared/errors.ts";
import type { ToolResult } from "../shared/result-schema.ts";
import { PING, PONG } from "../shared/runner-protocol.ts";
import { DEFAULT_REGION } from "../shared/config-schema.ts";
import type { SyncStatus } from "../shared/sync-schema.ts";
import { log } from "../log.ts";
import { answerClose } from "../http/close-reply.ts";
import { getRuntime, type Runtime } from "../runtime.ts";
import { migrate } from "../storage/migrate.ts";
import { SessionSync } from "../persistence/session-sync.ts";
import { AlarmClock } from "./alarm-clock.ts";
import { now } from "./clock.ts";
import { IndexPush } from "./index-push.ts";
import { LinkGrace } from "./link-grace.ts";
import { sessionObjectName } from "./object-name.ts";
import { cannotRun } from "./open-message.ts";
import { Placement } from "./placement.ts";
import { Publication } from "./publication.ts";
import { toSession, type NewSession } from "./record.ts";
import { RunnerLink } from "./runner-link.ts";
import { RunnerMessages } from "./runner-messages.ts";
import { RuntimeCalls } from "./runtime-calls.ts";
import { Scheduler } from "./scheduler.ts";
import { SessionState } from "./session-state.ts";
import { Subscribers } from "./subscribers.ts";
import { Turns } from "./turns.ts";
import m0001 from "../../migrations/session/0001_init.sql";
import m0002 from "../../migrations/session/0002_turns.sql";
import m0003 from "../../migrations/session/0003_ended_calls.sql";
import m0004 from "../../migrations/session/0004_bindings.sql";
import m0005 from "../../migrations/session/0005_sync.sql";
import m0006 from "../../migrations/session/0006_runtime_results.sql";
import m0007 from "../../migrations/session/0007_sync_orphans.sql";
import m0008 from "../../migrations/session/0008_native_hash.sql";
import m0009 from "../../migrations/session/0009_sync_storage.sql";
import m0010 from "../../migrations/session/0010_sync_strays.sql";
import m0011 from "../../migrations/session/0011_runtime_tool.sql";

const MIGRATIONS = [m0001, m0002, m0003, m0004, m0005, m0006, m0007, m0008, m0009, m0010, m0011];

export { sessionObjectName };

export class SessionObject extends DurableObject<Env> {
  readonly #state: SessionState;
  readonly #subs: Subscribers;
  readonly #turns: Turns;
  readonly #link: RunnerLink;
  readonly #calls: RuntimeCalls;
  readonly #sync: SessionSync;
  readonly #placement: Placement;
  readonly #publication: Publication;
  readonly #work: Scheduler;
  readonly #runner: RunnerMessages;
  readonly #grace: LinkGrace<WebSocket>;
  readonly #alarm: AlarmClock;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage, MIGRATIONS);
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING, PONG));
    const alarm = (this.#alarm = new AlarmClock(ctx.storage));
    const arm = (at: number) => alarm.arm(at);
    const keepAlive = (p: Promise<unknown>) => ctx.waitUntil(p);
    const runtime = () => getRuntime(env);
    const state = (this.#state = new SessionState(ctx.storage));
    this.#subs = new Subscribers(ctx);
    const turns = (this.#turns = new Turns(state));
    const link = (this.#link = new RunnerLink(ctx, state));
    const calls = (this.#calls = new RuntimeCalls(state, link, env));
    this.#sync = new SessionSync({ env, state, arm, keepAlive });
    const placement = (this.#placement = new Placement({ kv: ctx.storage.kv, runners: env.RUNNERS }));
    const publication = (this.#publication = new Publication({ state, subs: this.#subs, calls, env, keepAlive }));
    const index = new IndexPush({ state, arm, index: (tenant) => env.TENANTS.getByName(tenant) });
    const changed = () => this.#sync.changed();
    const watch = () => this.#grace.watch();
    const work = (this.#work = new Scheduler({ state, turns, link, placement, publication, index, changed, watch, runtime }));
    const live = (events: Event[]) => this.#subs.publish(events);
    this.#runner = new RunnerMessages({ state, turns, link, calls, live, publication, work, runtime });
    this.#grace = new LinkGrace({ state, link, arm, lose: (message) => work.loseRunner(message), running: () => turns.running() !== undefined });
    void ctx.blockConcurrencyWhile(() => this.#grace.noticeLost());
  }

  /** `region`: the home region the Worker chose (the object was created near it). */
  async create(n: NewSession, region: string = DEFAULT_REGION): Promise<Result<Session>> {
    const create = () => asResultAsync(async () => this.#state.create(n, now()));
    const r = this.#state.row() ? await create() : await this.#sync.admitted(sessionObjectName(n.tenant, n.id), create);
    if (r.ok) {
      this.#placement.setHome(region);
      await this.#work.pushIndex(true);
    }
    return r;
  }

  /** Whether inspection tool call `call` is still open: the Worker's authentication asks first. */
  inspectionOpen(call: string): boolean {
    return !this.#turns.callEnded(call);
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

  /**
   * The status, after noting what storage lacks: a session changed while persistence was off, or
   * before the storage moved, starts its upload at this read rather than at its next change.
   */
  syncStatus(): Promise<Result<SyncStatus>> {
    return asResultAsync(async () => {
      this.#state.require();
      await this.#sync.changed();
      return this.#sync.status();
    });
  }

  async restore(checkpoint: string): Promise<Result<Session>> {
    const r = await asResultAsync(async () => {
      await this.#sync.restore(checkpoint, () => this.#link.release("restored from a checkpoint"));
      this.#subs.endAll("restored from a checkpoint");
      return toSession(this.#state.require());
    });
    if (r.ok) await this.#work.pushIndex(true);
    return r;
  }

  async load(tenant: string, id: string): Promise<Result<boolean>> {
    const r = await asResultAsync(() => this.#sync.load(tenant, id));
    if (r.ok && r.value) await this.#work.pushIndex(true);
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

  /** `draining`: the service is shutting down, so only a repeated key's message is answered (with its original event). */
  async send(input: Input, traceparent?: string, draining = false): Promise<Result<Event | Status>> {
    const rt = await getRuntime(this.env);
    const row = this.#state.row();
    const blocked = row && input.type === "user.message" ? cannotRun(rt, row) : undefined;
    const sent = await this.#send(rt, input, traceparent, draining, blocked);
    // Refused because the session cannot run under the configuration: input it already held
    // cannot run either, and fails now (scheduler.ts) rather than waiting for good.
    if (blocked && !draining && !sent.ok) await this.#work.schedule();
    return sent;
  }

  async #send(rt: Runtime, input: Input, traceparent: string | undefined, draining: boolean, blocked: string | undefined): Promise<Result<Event | Status>> {
    const { limits } = rt.config;
    if (draining && input.type === "user.message") {
      const checked = asResult(() => this.#state.checkMessage(input, limits));
      if (checked.ok && checked.value) return { ok: true, value: checked.value };
      return { ok: false, error: overloaded("the service is shutting down").toBody() };
    }
    const running = this.#turns.running()?.event_id;
    const record = () =>
      this.#work.commit(false, () => {
        const change = this.#state.send(input, limits, now(), traceparent, blocked);
        if (input.type === "user.interrupt" && running && change.events.length > 0) {
          this.#link.push({ t: "interrupt", turn: running });
        }
        return change;
      });
    // A message to an idle session may need (with persistence) a place in the upload backlog, then
    // it placed on a runner-host, each refused with 429 when full. What repeats or refuses the
    // message anyway is answered first, so neither is taken for it, nor a repeat refused. Admitted
    // first: a placement is not undone as simply as an admission.
    if (input.type === "user.message" && this.#state.row()?.status === "idle") {
      const place = this.#work.needsPlacement();
      if (place || this.#sync.needsAdmission(rt.config)) {
        const checked = asResult(() => this.#state.checkMessage(input, limits, blocked));
        if (!checked.ok) return checked;
        if (checked.value) return { ok: true, value: checked.value };
      }
      const r = this.#state.require();
      return this.#sync.admitted(sessionObjectName(r.tenant, r.id), async () => {
        if (place && !(await this.#work.placeForMessage())) {
          return { ok: false, error: overloaded("every runner-host is at its loaded-session limit").toBody() };
        }
        return record();
      });
    }
    const sent = await record();
    if (input.type === "user.interrupt" && sent.ok) {
      await this.#work.claimSettled(); // a message's placement in flight is that message's, not this interrupt's
      await this.#work.letGoUnopened();
    }
    return sent;
  }

  async resume(): Promise<Result<Session>> {
    // A change to upload, like a message: with a full persistence queue, 429 (docs/api.md "Flush,
    // sync, restore"). Only a resume that can happen asks; the others are 409 below.
    const resume = () =>
      this.#work.commit(true, () =>
        this.#state.storage.transactionSync(() => {
          const change = this.#state.resume(now());
          // Restored from the last completed checkpoint: the harness re-opens from that state.
          this.#turns.revertNative();
          this.#link.release("resumed from the last checkpoint");
          return change;
        }),
      );
    const r = this.#state.row();
    if (r?.status !== "interrupted" && r?.status !== "failed") return resume();
    return this.#sync.admitted(sessionObjectName(r.tenant, r.id), resume);
  }

  async close(): Promise<Result<Status>> {
    // A message's placement in flight could park the session again after the withdraw below.
    await this.#work.claimSettled();
    const placing = this.#state.row()?.link_state === "requested";
    const r = await this.#work.commit(true, () =>
      this.#state.storage.transactionSync(() => {
        const change = this.#state.close(now());
        if (change.events.length > 0) {
          this.#link.release("session closed");
          this.#turns.closeCheckpoint(now());
        }
        return change;
      }),
    );
    if (placing && r.ok) await this.#work.withdraw();
    return r;
  }

  /** `POST /executors` with `session`: the runtime binding `alias` now routes to `executor`. */
  async rebind(alias: string, tools: Tool[], executor: string): Promise<Result<void>> {
    const r = asResult(() => this.#state.storage.transactionSync(() => this.#calls.rebind(alias, tools, executor, now())));
    if (r.ok) {
      await this.#sync.recordChanged();
      await this.#work.pushIndex(true);
    }
    return r;
  }

  /** ExecutorObject: a runtime call's result (or its unknown outcome); conflict when it ended. */
  runtimeReply(callId: string, result: ToolResult): Result<void> {
    return this.#calls.reply(callId, result);
  }

  /** ExecutorObject: a runtime call's progress, published live; conflict when it ended. */
  runtimeProgress(callId: string, data: unknown): Result<void> {
    const e = this.#calls.progress(callId, data, now());
    if (!e) return { ok: false, error: conflict("the call is not waiting for progress").toBody() };
    this.#subs.publish([e]);
    return { ok: true, value: undefined };
  }

  /** RunnerPool: the runner-host that held `lease` restarted or vanished. */
  async runnerGone(lease: number): Promise<void> {
    const row = this.#state.row();
    if (!row || row.lease !== lease || row.link_state === "none") return;
    this.#work.loseRunner("the runner-host running this session was lost");
    await this.#work.afterChange();
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
    this.#publication.publish(events);
    await this.#work.afterChange();
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
    if (this.#link.isRunnerSocket(ws)) return this.#runner.onMessage(ws, text);
    if (!this.#subs.isSubscriber(ws)) return;
    const row = this.#state.row();
    if (!row) return ws.close(1011, "session is gone");
    this.#subs.onMessage(ws, text, {
      read: (seq, limit, maxBytes) => ({
        events: this.#state.log.read(seq, limit, maxBytes).map((l) => ({ seq: l.seq, event: this.#state.withCursor(row, l.seq, l.event) })),
        lastSeq: this.#state.log.lastSeq(),
      }),
      closed: () => row.status === "closed",
    });
  }

  async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    answerClose(ws, code);
    if (this.#subs.isSubscriber(ws)) {
      log("info", "event stream closed", { session_id: this.#state.row()?.id, code });
      return;
    }
    if (this.#link.isRunnerSocket(ws)) await this.#grace.closed(ws);
  }

  alarm(): Promise<void> {
    return this.#alarm.firing(async () => {
      await this.#grace.check();
      await this.#work.schedule();
      // The alarm is when a coalesced or failed push is due.
      await this.#work.pushIndex(true);
      await this.#sync.alarm();
    });
  }

  #requireOpenCall(call: string | undefined): void {
    if (call !== undefined && this.#turns.callEnded(call)) throw unauthorized("the inspection token's tool call has ended");
  }
}
