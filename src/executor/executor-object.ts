/**
 * ExecutorObject: one registered executor (docs/api.md "Executors"): its token digest, its current
 * connection (an SSE command stream relayed by the Worker, or an RPC WebSocket), and the calls it
 * owes an answer for. Object name: the executor id.
 *
 * Thin: state lives in ExecutorState, sockets in Connections. Outcome rules:
 * - a call is sent only to a live connection; with none (never connected, dropped, closed) it ends
 *   at once as unavailable, without `unknown_outcome`;
 * - a call in flight when its connection drops, is replaced by a newer one, or the executor closes
 *   ends as `is_error` + `unknown_outcome` (commands are never replayed);
 * - only the current connection's replies to a call still waiting are accepted; anything else is
 *   `409 conflict`.
 * Idle costs nothing: the sockets hibernate, and the alarm is armed only while calls are pending
 * (it finds connections that vanished in an object restart, when no close event comes).
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import { EmptySchema, type Status } from "../shared/api-schema.ts";
import {
  CREDENTIAL_ARGUMENT,
  RPC_SUBPROTOCOL,
  type Dispatch,
  type Dispatched,
  type ExecutorInfo,
  type Reply,
  type RpcError,
} from "../shared/executor-protocol.ts";
import type { ToolResult } from "../shared/result-schema.ts";
import { asResult, asResultAsync, conflict, ERROR_STATUS, invalid, ServiceError, unauthorized, type Result } from "../shared/errors.ts";
import { BODY_OVERHEAD_BYTES, parseBody } from "../http/body.ts";
import { publicError, toServiceError } from "../http/errors.ts";
import { callIdOf, parseReply } from "./replies.ts";
import { sameDigest } from "../shared/digest.ts";
import { byteLength, newId } from "../shared/ids.ts";
import { log } from "../log.ts";
import { answerClose } from "../http/close-reply.ts";
import { getRuntime } from "../runtime.ts";
import { Connections, type Kind } from "./connections.ts";
import { ExecutorState, lostResult, unavailableResult, type NewExecutor, type PendingRow } from "./executor-state.ts";
import m0001 from "../../migrations/executor/0001_init.sql";

const MIGRATIONS = [m0001];

/**
 * Period of the pending-call sweep, ms: armed only while calls are pending. It bounds how long a
 * call waits after its connection vanished without a close event (an object restart) when the
 * executor does not reconnect; a reconnect ends such calls at once.
 */
export const SWEEP_MS = 15_000;

/** Header on the Worker → object upgrade carrying the SHA-256 of the token the client presented. */
export const TOKEN_DIGEST_HEADER = "x-svc-executor-token-digest";

export class ExecutorObject extends DurableObject<Env> {
  readonly #state: ExecutorState;
  readonly #conns: Connections;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // An id nobody registered stays an empty object: its schema is made by the registration.
    this.#state = new ExecutorState(ctx.storage, MIGRATIONS);
    this.#conns = new Connections(ctx);
  }

  register(n: NewExecutor): Result<void> {
    return asResult(() => {
      this.#state.create();
      this.ctx.storage.transactionSync(() => this.#state.register(n, new Date().toISOString()));
    });
  }

  /** Undoes a registration whose rebinding was refused. */
  async discard(): Promise<void> {
    this.#conns.closeOthers(undefined, "discarded");
    await this.ctx.storage.deleteAll();
    this.#state.forget();
  }

  info(): Result<ExecutorInfo> {
    return asResult(() => this.#state.info());
  }

  /** The executor's tenant, for this token (404 unknown, 401 wrong token): whose stream slot a connection takes. */
  tenantFor(digest: string): Result<string> {
    return asResult(() => this.#authorize(digest).tenant);
  }

  /** `POST /executors/{id}/close`: idempotent; pending dispatched calls end with unknown outcomes. */
  async close(digest: string, body: string): Promise<Result<Status>> {
    return asResultAsync(async () => {
      const row = this.#authorize(digest);
      parseBody(body, EmptySchema, {});
      if (row.state === "closed") return { status: "closed" };
      this.ctx.storage.transactionSync(() => {
        this.#state.lose(undefined, "the executor was closed");
        this.#state.setClosed();
      });
      this.#conns.closeOthers(undefined, "executor closed");
      log("info", "executor closed", { executor_id: row.id });
      await this.#deliverLost();
      return { status: "closed" };
    });
  }

  /** `POST /executors/{id}/responses`: the body is parsed after the token check. */
  async reply(digest: string, body: string): Promise<Result<Status>> {
    return asResultAsync(async () => {
      this.#authorize(digest);
      await this.#accept(parseReply(body));
      return { status: "accepted" };
    });
  }

  /** A session's runtime call: sent to the live connection now, or answered as unavailable. */
  async dispatch(d: Dispatch): Promise<Result<Dispatched>> {
    return asResultAsync(async () => {
      const row = this.#state.require();
      if (row.state === "closed") return { result: unavailableResult("its executor is closed") };
      const connection = row.connection;
      if (!this.#conns.socket(connection)) return { result: unavailableResult("its executor is not connected") };
      if (this.#state.pending(d.call_id)) return {};
      this.#state.addPending(d.call_id, connection!, d.session);
      // The override joins the command here, on its way out; it is never stored. The member is the
      // service's alone: one the model sent is dropped, so an executor never acts on a forged value.
      const { [CREDENTIAL_ARGUMENT]: _fromModel, ...modelArgs } = d.arguments;
      const args = d.credential === undefined ? modelArgs : { ...modelArgs, [CREDENTIAL_ARGUMENT]: d.credential };
      const sent = this.#conns.send(connection, { type: "call", connection: connection!, call_id: d.call_id, tool: d.tool, arguments: args, scope: d.scope });
      if (!sent) {
        this.#state.remove(d.call_id);
        return { result: unavailableResult("its executor is not connected") };
      }
      await this.#armSweep();
      return {};
    });
  }

  /** The session no longer waits for this call (interrupt, close, timeout): tell the executor. */
  cancel(callId: string): void {
    const p = this.#state.pending(callId);
    if (!p || p.state !== "dispatched") return;
    this.#state.remove(callId);
    this.#conns.send(p.connection, { type: "cancel", connection: p.connection, call_id: callId });
  }

  /** `/commands` (the Worker's SSE relay) and `/rpc` (the executor's WebSocket) connect here. */
  async fetch(request: Request): Promise<Response> {
    const path = new URL(request.url).pathname;
    const kind: Kind | undefined = path === "/commands" ? "sse" : path === "/rpc" ? "rpc" : undefined;
    if (!kind || request.headers.get("Upgrade")?.toLowerCase() !== "websocket") return new Response(null, { status: 404 });
    const r = asResult(() => {
      const row = this.#authorize(request.headers.get(TOKEN_DIGEST_HEADER) ?? "");
      if (row.state === "closed") throw conflict("the executor is closed");
      return row;
    });
    if (!r.ok) return Response.json(r.error, { status: r.error.status ?? ERROR_STATUS[r.error.code] });
    const connection = newId();
    // A new connection makes every older one stale: their calls in flight are lost.
    this.#state.connect(connection, "the executor connected again, which ends the previous connection");
    this.#conns.closeOthers(connection, "replaced by a newer connection");
    const res = this.#conns.accept(connection, kind, kind === "rpc" ? { "Sec-WebSocket-Protocol": RPC_SUBPROTOCOL } : undefined);
    log("info", "executor connected", { executor_id: r.value.id, kind });
    await this.#deliverLost();
    return res;
  }

  async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    const a = this.#conns.of(ws);
    if (a?.kind !== "rpc") return;
    let text = typeof message === "string" ? message : "";
    const { limits } = (await getRuntime(this.env)).config;
    let callId: string | undefined;
    try {
      // A binary message holds a Reply as UTF-8, strictly, as a request body does.
      if (typeof message !== "string") text = strictUtf8(message);
      // A leading byte-order mark is dropped, as from a request body (whose decoder drops it).
      else if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      if (byteLength(text) > limits.input_bytes + BODY_OVERHEAD_BYTES) {
        throw new ServiceError("invalid_request", `message is larger than ${limits.input_bytes + BODY_OVERHEAD_BYTES} bytes`, 413);
      }
      const reply = parseReply(text);
      callId = reply.call_id;
      await this.#accept(reply);
    } catch (e) {
      const err = toServiceError(e);
      if (err.status >= 500) log("error", "executor reply failed", { error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
      if (callId === undefined) callId = callIdOf(text);
      const body: RpcError = { error: publicError(err) };
      if (callId !== undefined) body.call_id = callId;
      ws.send(JSON.stringify(body));
    }
  }

  async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    answerClose(ws, code);
    await this.#dropped(ws);
  }

  async webSocketError(ws: WebSocket): Promise<void> {
    await this.#dropped(ws);
  }

  async alarm(): Promise<void> {
    const row = this.#state.row();
    if (!row) return;
    // A connection gone without a close event (the object restarted): its calls are lost.
    const live = new Set(this.#state.allPending().filter((p) => this.#conns.socket(p.connection)).map((p) => p.connection));
    for (const p of this.#state.allPending()) {
      if (p.state === "dispatched" && !live.has(p.connection)) this.#state.lose(p.connection, "the executor's connection was lost");
    }
    await this.#deliverLost(true);
    if (this.#state.allPending().length > 0) await this.#armSweep();
  }

  async #dropped(ws: WebSocket): Promise<void> {
    const a = this.#conns.of(ws);
    const row = this.#state.row();
    if (!a || !row) return;
    // A newer connection of the same identity cannot exist: its calls are lost unless it is still open.
    if (this.#conns.socket(a.connection)) return;
    this.#state.lose(a.connection, "the executor's connection dropped");
    log("info", "executor connection dropped", { executor_id: row.id, kind: a.kind });
    await this.#deliverLost();
  }

  /** Applies one reply (HTTP or RPC) after the token check. */
  async #accept(reply: Reply): Promise<void> {
    const row = this.#state.requireOpen();
    if (reply.connection !== row.connection || !this.#conns.socket(row.connection)) {
      throw conflict("the reply names a connection that is not the executor's current one");
    }
    const p = this.#state.pending(reply.call_id);
    if (!p || p.connection !== reply.connection || p.state !== "dispatched") {
      throw conflict("no call waits for this reply (unsolicited, duplicate, cancelled or late)");
    }
    const session = this.env.SESSIONS.getByName(p.session);
    if (reply.result === undefined) {
      const r = await session.runtimeProgress(reply.call_id, reply.progress);
      if (!r.ok) {
        this.#state.remove(reply.call_id);
        throw conflict("the call has ended; its progress came too late");
      }
      return;
    }
    this.#state.answering(reply.call_id, reply.result);
    let taken: boolean;
    try {
      taken = (await session.runtimeReply(reply.call_id, reply.result)).ok;
    } catch (e) {
      this.#state.setState(reply.call_id, "dispatched");
      throw e;
    }
    this.#state.remove(reply.call_id);
    if (!taken) throw conflict("the call has ended; its result came too late");
  }

  /** Delivers the results of lost calls (and, from the sweep, interrupted deliveries). */
  async #deliverLost(includeAnswering = false): Promise<void> {
    const rows: PendingRow[] = includeAnswering
      ? this.#state.allPending().filter((p) => p.state !== "dispatched")
      : this.#state.lost();
    let failed = false;
    for (const p of rows) {
      try {
        const result: ToolResult = p.result ? (JSON.parse(p.result) as ToolResult) : lostResult("the executor's connection was lost");
        await this.env.SESSIONS.getByName(p.session).runtimeReply(p.call_id, result);
        this.#state.remove(p.call_id);
      } catch (e) {
        failed = true;
        log("warn", "executor result delivery failed", { call_id: p.call_id, error: String(e) });
      }
    }
    if (failed) await this.#armSweep();
  }

  #authorize(digest: string) {
    const row = this.#state.require();
    if (!sameDigest(digest, row.token_digest)) throw unauthorized("the executor token is missing or wrong");
    return row;
  }

  async #armSweep(): Promise<void> {
    const at = Date.now() + SWEEP_MS;
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > at) await this.ctx.storage.setAlarm(at);
  }
}

function strictUtf8(bytes: ArrayBuffer): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw invalid("message is not valid UTF-8");
  }
}
