/**
 * Typed client of the agent session service. Runtime needs: `fetch` and `eventsource-parser`.
 * Types come from the same zod schemas that generate openapi.json (type-only imports: nothing of
 * zod is loaded at run time).
 *
 *   const svc = new SvcClient({ baseUrl, token });
 *   const s = await svc.createSession({ harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } });
 *   await svc.sendMessage(s.id, "hello");
 *   for await (const e of svc.stream(s.id)) if (e.type === "assistant.message") console.log(e.data.text);
 */
import type * as z from "zod";
import type {
  CreateSessionSchema,
  HealthSchema,
  InputSchema,
  Session,
  SessionListSchema,
  Status,
  ToolCatalogSchema,
} from "../src/shared/api-schema.ts";
import type { SessionEvent, EventListSchema, UserMessageEventSchema } from "../src/shared/event-schema.ts";
import type { Command, ExecutorCredential, ExecutorRegistration, Reply } from "../src/shared/executor-protocol.ts";
import type { SyncStatus } from "../src/shared/sync-schema.ts";
import { ApiError, Transport, type ClientOptions } from "./http.ts";
import { eventStream, frames, StreamGaveUpError, type StreamOptions } from "./stream.ts";

export { ApiError, StreamGaveUpError, type ClientOptions, type StreamOptions };
export type { Command, ExecutorCredential, ExecutorRegistration, Reply, Session, SessionEvent, Status, SyncStatus };
export type CreateSession = z.input<typeof CreateSessionSchema>;
export type Input = z.input<typeof InputSchema>;
export type SessionList = z.output<typeof SessionListSchema>;
export type EventList = z.output<typeof EventListSchema>;
export type UserMessageEvent = z.output<typeof UserMessageEventSchema>;
export type ToolCatalog = z.output<typeof ToolCatalogSchema>;
export type Health = z.output<typeof HealthSchema>;

const enc = encodeURIComponent;

export class SvcClient {
  readonly #t: Transport;
  readonly #o: ClientOptions;

  constructor(o: ClientOptions) {
    this.#o = { ...o };
    this.#t = new Transport(o);
  }

  /**
   * The same client (base URL, `fetch`, `retries`) with another token: a read-only or
   * session-scoped one, an executor credential.
   */
  withToken(token: string): SvcClient {
    return new SvcClient({ ...this.#o, token });
  }

  // ── sessions ──
  createSession(body: CreateSession): Promise<Session> {
    return this.#t.json("POST", "/sessions", { body });
  }
  listSessions(q: { after?: string; limit?: number } = {}): Promise<SessionList> {
    return this.#t.json("GET", "/sessions", { query: q });
  }
  getSession(id: string): Promise<Session> {
    return this.#t.json("GET", `/sessions/${enc(id)}`);
  }
  /** Sends an Input: a `user.message` answers its recorded event, a `user.interrupt` a Status. */
  send(id: string, input: Input, o: { traceparent?: string } = {}): Promise<UserMessageEvent | Status> {
    const headers = o.traceparent ? { traceparent: o.traceparent } : undefined;
    return this.#t.json("POST", `/sessions/${enc(id)}/events`, { body: input, headers });
  }
  /** Queues a message. Pass a `key` to make retries safe: the same key returns the first event. */
  sendMessage(id: string, text: string, o: { key?: string; traceparent?: string } = {}): Promise<UserMessageEvent> {
    const input: Input = { type: "user.message", text, ...(o.key !== undefined ? { key: o.key } : {}) };
    return this.send(id, input, o) as Promise<UserMessageEvent>;
  }
  interrupt(id: string): Promise<Status> {
    return this.send(id, { type: "user.interrupt" }) as Promise<Status>;
  }
  /** One JSON page of retained events after `after` (a cursor, or a previous `next_cursor`). */
  events(id: string, q: { after?: string; limit?: number } = {}): Promise<EventList> {
    return this.#t.json("GET", `/sessions/${enc(id)}/events`, { query: q });
  }
  /**
   * Every event of the session from `after` on, live ones included, as an async iterator. Survives
   * dropped connections (resumes from the last cursor), waits out `429`, and ends after `closed`.
   */
  stream(id: string, o: StreamOptions = {}): AsyncGenerator<SessionEvent> {
    return eventStream<SessionEvent>(this.#t, id, o);
  }
  resume(id: string): Promise<Session> {
    return this.#t.json("POST", `/sessions/${enc(id)}/resume`);
  }
  close(id: string): Promise<Status> {
    return this.#t.json("POST", `/sessions/${enc(id)}/close`);
  }
  flush(id: string): Promise<SyncStatus> {
    return this.#t.json("POST", `/sessions/${enc(id)}/flush`);
  }
  syncStatus(id: string): Promise<SyncStatus> {
    return this.#t.json("GET", `/sessions/${enc(id)}/sync`);
  }
  restore(id: string, checkpoint: string): Promise<Session> {
    return this.#t.json("POST", `/sessions/${enc(id)}/restore`, { body: { checkpoint } });
  }

  // ── tools and executors ──
  catalog(): Promise<ToolCatalog> {
    return this.#t.json("GET", "/catalog");
  }
  registerExecutor(body: ExecutorRegistration): Promise<ExecutorCredential> {
    return this.#t.json("POST", "/executors", { body });
  }
  /**
   * An executor's command stream (call with the executor credential as token). Not resumable:
   * commands are never replayed. Ends when the server ends it or `signal` aborts (as `stream`
   * does); a dropped connection throws (open a new one: pending calls get `unknown_outcome`).
   */
  async *commands(executorId: string, o: { signal?: AbortSignal } = {}): AsyncGenerator<Command> {
    if (o.signal?.aborted) return;
    try {
      const res = await this.#t.raw(this.#t.url(`/executors/${enc(executorId)}/commands`), {
        headers: this.#t.headers({ Accept: "text/event-stream" }),
        signal: o.signal,
      });
      if (!res.ok) throw await ApiError.from(res);
      for await (const f of frames(res, o.signal)) yield JSON.parse(f.data) as Command;
    } catch (e) {
      if (o.signal?.aborted && !(e instanceof ApiError)) return;
      throw e;
    }
  }
  reply(executorId: string, body: Reply): Promise<Status> {
    return this.#t.json("POST", `/executors/${enc(executorId)}/responses`, { body });
  }
  closeExecutor(executorId: string): Promise<Status> {
    return this.#t.json("POST", `/executors/${enc(executorId)}/close`);
  }

  // ── service ──
  live(): Promise<Health> {
    return this.#t.json("GET", "/health/live");
  }
  /** Readiness: `ready`, or `not_ready` (a `503`, returned rather than thrown). */
  async ready(): Promise<Health> {
    const res = await this.#t.fetch("GET", "/health/ready");
    if (res.status !== 200 && res.status !== 503) throw await ApiError.from(res);
    return (await res.json()) as Health;
  }
  openapi(): Promise<Record<string, unknown>> {
    return this.#t.json("GET", "/openapi.json");
  }
}
