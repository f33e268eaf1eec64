/**
 * SessionObject: the single owner of one session (status, queue, event log, subscribers).
 * Thin: RPC methods return Results and delegate to SessionState; after each committed change the
 * object publishes the new events and pushes the session's summary to its TenantObject.
 *
 * Object name: `<session id>:<tenant>`, so another tenant's id maps to a different, empty object
 * and looks unknown (404).
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import type { EventList, Session, Status } from "../shared/api-schema.ts";
import { asResult, asResultAsync, type Result } from "../shared/errors.ts";
import { log } from "../log.ts";
import { migrate } from "../storage/migrate.ts";
import type { LoggedEvent } from "./event-log.ts";
import { toSession, type NewSession } from "./record.ts";
import { SessionState } from "./session-state.ts";
import m0001 from "../../migrations/session/0001_init.sql";

const MIGRATIONS = [m0001];

/** Retry delay for a tenant-index push that failed, ms. Only armed while the index is behind. */
const INDEX_RETRY_MS = 2_000;

export function sessionObjectName(tenant: string, id: string): string {
  return `${id}:${tenant}`;
}

export class SessionObject extends DurableObject<Env> {
  readonly #state: SessionState;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage, MIGRATIONS);
    this.#state = new SessionState(ctx.storage);
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

  async close(): Promise<Result<Status>> {
    return asResultAsync(async () => {
      const change = this.#state.close(now());
      this.#publish(change.events);
      if (change.events.length > 0) await this.#pushIndex();
      return change.value;
    });
  }

  async alarm(): Promise<void> {
    await this.#pushIndex();
  }

  #publish(_events: LoggedEvent[]): void {
    // Live fan-out to subscribers arrives with the streaming path.
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
