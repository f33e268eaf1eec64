/**
 * SessionObject: the single owner of one session (status, queue, event log, subscribers).
 * Thin: RPC methods return Results and delegate to SessionState; after each committed change the
 * object publishes the new events to live subscribers (before any await, so publication order is
 * commit order) and pushes the session's summary to its TenantObject.
 *
 * Object name: `<session id>:<tenant>`, so another tenant's id maps to a different, empty object
 * and looks unknown (404).
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import type { Event, EventList, Input, Session, Status } from "../shared/api-schema.ts";
import { asResult, asResultAsync, ERROR_STATUS, overloaded, type Result } from "../shared/errors.ts";
import { log } from "../log.ts";
import { getRuntime } from "../runtime.ts";
import { migrate } from "../storage/migrate.ts";
import type { LoggedEvent } from "./event-log.ts";
import { toSession, type NewSession } from "./record.ts";
import { SessionState, type Change } from "./session-state.ts";
import { Subscribers } from "./subscribers.ts";
import m0001 from "../../migrations/session/0001_init.sql";

const MIGRATIONS = [m0001];

/** Retry delay for a tenant-index push that failed, ms. Only armed while the index is behind. */
const INDEX_RETRY_MS = 2_000;

export function sessionObjectName(tenant: string, id: string): string {
  return `${id}:${tenant}`;
}

export class SessionObject extends DurableObject<Env> {
  readonly #state: SessionState;
  readonly #subs: Subscribers;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage, MIGRATIONS);
    this.#state = new SessionState(ctx.storage);
    this.#subs = new Subscribers(ctx);
  }

  async create(n: NewSession): Promise<Result<Session>> {
    const r = asResult(() => this.#state.create(n, now()));
    if (r.ok) await this.#pushIndex();
    return r;
  }

  get(): Result<Session> {
    return asResult(() => toSession(this.#state.require()));
  }

  readEvents(after: string, limit: number): Result<EventList> {
    return asResult(() => this.#state.page(after, limit));
  }

  async send(input: Input, traceparent?: string): Promise<Result<Event | Status>> {
    const { limits } = (await getRuntime(this.env)).config;
    return this.#commit(() => this.#state.send(input, limits, now(), traceparent));
  }

  async resume(): Promise<Result<Session>> {
    return this.#commit(() => this.#state.resume(now()));
  }

  async close(): Promise<Result<Status>> {
    return this.#commit(() => this.#state.close(now()));
  }

  /** SSE relays connect here: `GET /subscribe?after=<cursor>` with a WebSocket upgrade. */
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname !== "/subscribe" || request.headers.get("Upgrade")?.toLowerCase() !== "websocket") {
      return new Response(null, { status: 404 });
    }
    const { limits } = (await getRuntime(this.env)).config;
    const r = asResult(() => {
      const row = this.#state.require();
      const seq = this.#state.positionOf(row, url.searchParams.get("after") ?? "");
      if (this.#subs.count() >= limits.subscribers) {
        throw overloaded(`the session has ${limits.subscribers} open event streams`);
      }
      return seq;
    });
    if (!r.ok) return Response.json(r.error, { status: ERROR_STATUS[r.error.code] });
    return this.#subs.accept(r.value);
  }

  async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    if (!this.#subs.isSubscriber(ws)) return;
    const row = this.#state.row();
    if (!row) return ws.close(1011, "session is gone");
    this.#subs.onMessage(ws, typeof message === "string" ? message : "", {
      read: (seq, limit) => ({
        events: this.#state.log.read(seq, limit).map((l) => ({ seq: l.seq, event: this.#state.withCursor(row, l.seq, l.event) })),
        lastSeq: this.#state.log.lastSeq(),
      }),
      closed: () => row.status === "closed",
    });
  }

  async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    if (this.#subs.isSubscriber(ws)) log("info", "event stream closed", { session_id: this.#state.row()?.id, code });
  }

  async alarm(): Promise<void> {
    await this.#pushIndex();
  }

  /** Runs a state change, publishes what it appended, then updates the tenant index. */
  async #commit<T>(fn: () => Change<T>): Promise<Result<T>> {
    return asResultAsync(async () => {
      const change = fn();
      this.#publish(change.events);
      if (change.events.length > 0) await this.#pushIndex();
      return change.value;
    });
  }

  #publish(events: LoggedEvent[]): void {
    if (events.length === 0) return;
    const row = this.#state.require();
    this.#subs.publish(events.map((l) => this.#state.withCursor(row, l.seq, l.event)));
    if (row.status === "closed") this.#subs.endLive();
  }

  /** Pushes the current summary to the tenant index; on failure an alarm retries until it lands. */
  async #pushIndex(): Promise<void> {
    const row = this.#state.row();
    if (!row || row.indexed_version >= row.version) return;
    try {
      await this.env.TENANTS.getByName(row.tenant).upsert(row.id, row.version, toSession(row));
      this.#state.markIndexed(row.version);
    } catch (e) {
      log("warn", "tenant index push failed", { session_id: row.id, error: String(e) });
      await this.ctx.storage.setAlarm(Date.now() + INDEX_RETRY_MS);
    }
  }
}

function now(): string {
  return new Date().toISOString();
}
