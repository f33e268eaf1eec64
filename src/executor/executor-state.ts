/**
 * The stored state of one executor: its registration and the calls it owes an answer for.
 *
 * Storage layout (migrations/executor): `executor` holds the single registration row (tenant,
 * binding alias, descriptors, token digest, open/closed, current connection); `pending` one row per
 * call sent to the executor and not yet answered back to its session.
 *
 * Lifecycle of a pending call: `dispatched` when the command is sent → `answering` while the
 * executor's result travels to the session (a duplicate reply in that window is refused) → deleted
 * once the session took it. When its connection drops, is replaced, or the executor closes, a
 * `dispatched` call becomes `lost` with an unknown-outcome error as its result, delivered the same
 * way. Nothing here holds a credential: overrides are attached to a command as it is sent.
 *
 * The tables exist only once an executor was registered under this object's name: an unknown id
 * reads as no registration and no calls, and writes nothing (a lookup must not persist an object).
 */
import type { ToolResult } from "../shared/result-schema.ts";
import type { ExecutorInfo } from "../shared/executor-protocol.ts";
import { conflict, notFound } from "../shared/errors.ts";
import { hasSchema, migrate, type SqlStorage } from "../storage/migrate.ts";

export type ExecutorRow = {
  id: string;
  tenant: string;
  binding: string;
  tools: string;
  token_digest: string;
  state: "open" | "closed";
  connection: string | null;
  created_at: string;
};

export type PendingRow = {
  call_id: string;
  connection: string;
  session: string;
  state: "dispatched" | "answering" | "lost";
  result: string | null;
};

export type NewExecutor = { id: string; tenant: string; binding: string; tools: ExecutorInfo["tools"]; tokenDigest: string };

export class ExecutorState {
  readonly #s: SqlStorage;
  readonly #migrations: readonly string[];
  /** Whether the tables exist: read once here, then kept, so no call queries `sqlite_master`. */
  #created: boolean;

  /** An existing executor's tables get any newer migration now; an unknown id's stay absent. */
  constructor(storage: SqlStorage, migrations: readonly string[]) {
    this.#s = storage;
    this.#migrations = migrations;
    this.#created = hasSchema(storage);
    if (this.#created) migrate(storage, migrations);
  }

  /** Makes the tables before a registration's transaction (each migration is one of its own). */
  create(): void {
    if (this.#created) return;
    migrate(this.#s, this.#migrations);
    this.#created = true;
  }

  /** After `deleteAll`: the tables are gone with everything else. */
  forget(): void {
    this.#created = false;
  }

  row(): ExecutorRow | undefined {
    if (!this.#created) return undefined;
    return this.#s.sql.exec<ExecutorRow>("SELECT * FROM executor LIMIT 1").toArray()[0];
  }

  /** The registration, or `404`: an id never registered names nothing. */
  require(): ExecutorRow {
    const r = this.row();
    if (!r) throw notFound("executor not found");
    return r;
  }

  /** Refuses what a closed executor can no longer do. */
  requireOpen(): ExecutorRow {
    const r = this.require();
    if (r.state === "closed") throw conflict("the executor is closed");
    return r;
  }

  register(n: NewExecutor, now: string): void {
    if (this.row()) throw conflict("executor already exists");
    this.#s.sql.exec(
      "INSERT INTO executor (id, tenant, binding, tools, token_digest, state, created_at) VALUES (?, ?, ?, ?, ?, 'open', ?)",
      n.id,
      n.tenant,
      n.binding,
      JSON.stringify(n.tools),
      n.tokenDigest,
      now,
    );
  }

  info(): ExecutorInfo {
    const r = this.require();
    return { tenant: r.tenant, binding: r.binding, tools: JSON.parse(r.tools) as ExecutorInfo["tools"], closed: r.state === "closed" };
  }

  /** Makes `connection` current; the calls older connections had in flight become lost. */
  connect(connection: string, why: string): void {
    this.#s.transactionSync(() => {
      this.#s.sql.exec("UPDATE executor SET connection = ?", connection);
      this.loseExcept(connection, why);
    });
  }

  setClosed(): void {
    this.#s.sql.exec("UPDATE executor SET state = 'closed', connection = NULL");
  }

  pending(callId: string): PendingRow | undefined {
    if (!this.#created) return undefined;
    return this.#s.sql.exec<PendingRow>("SELECT * FROM pending WHERE call_id = ?", callId).toArray()[0];
  }

  allPending(): PendingRow[] {
    if (!this.#created) return [];
    return this.#s.sql.exec<PendingRow>("SELECT * FROM pending").toArray();
  }

  addPending(callId: string, connection: string, session: string): void {
    this.#s.sql.exec("INSERT INTO pending (call_id, connection, session, state) VALUES (?, ?, ?, 'dispatched')", callId, connection, session);
  }

  setState(callId: string, state: PendingRow["state"]): void {
    this.#s.sql.exec("UPDATE pending SET state = ? WHERE call_id = ?", state, callId);
  }

  /**
   * The call's result is on its way to the session: `answering` refuses a duplicate meanwhile, and
   * the stored result lets the sweep finish the delivery should the object restart.
   */
  answering(callId: string, result: ToolResult): void {
    this.#s.sql.exec("UPDATE pending SET state = 'answering', result = ? WHERE call_id = ?", JSON.stringify(result), callId);
  }

  remove(callId: string): void {
    this.#s.sql.exec("DELETE FROM pending WHERE call_id = ?", callId);
  }

  /** Every `dispatched` call of `connection` (all connections when undefined) becomes lost. */
  lose(connection: string | undefined, why: string): void {
    const result = JSON.stringify(lostResult(why));
    if (connection === undefined) this.#s.sql.exec("UPDATE pending SET state = 'lost', result = ? WHERE state = 'dispatched'", result);
    else this.#s.sql.exec("UPDATE pending SET state = 'lost', result = ? WHERE state = 'dispatched' AND connection = ?", result, connection);
  }

  loseExcept(connection: string, why: string): void {
    this.#s.sql.exec(
      "UPDATE pending SET state = 'lost', result = ? WHERE state = 'dispatched' AND connection <> ?",
      JSON.stringify(lostResult(why)),
      connection,
    );
  }

  lost(): (PendingRow & { result: string })[] {
    if (!this.#created) return [];
    return this.#s.sql.exec<PendingRow & { result: string }>("SELECT * FROM pending WHERE state = 'lost'").toArray();
  }
}

/** The result of a call whose executor may or may not have acted on it (docs/api.md "How a runtime call ends"). */
export function lostResult(why: string): ToolResult {
  return { content: [{ type: "text", text: `the executor call ended without a result: ${why}` }], is_error: true, unknown_outcome: true };
}

/** The result of a call that never reached an executor: nothing happened remotely. */
export function unavailableResult(why: string): ToolResult {
  return { content: [{ type: "text", text: `the tool is unavailable: ${why}` }], is_error: true };
}
