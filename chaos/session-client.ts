/**
 * One session as a chaos client uses it: created with the `echo` tool, followed over SSE from the
 * start, messages sent with an idempotency key (a send cut by a fault is retried with the same
 * key once the service is back, as docs/api.md "Errors" asks), turns awaited on the stream,
 * resume after an `interrupted` or `failed` turn. At the end it reads the whole log as JSON pages
 * and hands the judge what it saw.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Event } from "../src/shared/api-schema.ts";
import { Follower } from "./follower.ts";
import type { SessionObservation } from "./judge.ts";

/** Attempts for a send or resume that fails on the network or with 429, and the wait between. */
const ATTEMPTS = 8;
const ATTEMPT_GAP_MS = 250;
/** JSON page size of the final read (the maximum, docs/api.md "Limits"). */
const PAGE = 1000;

export type Api = { base: string; gate(): Promise<void> };
export type TurnEnd = "idle" | "interrupted" | "failed" | "closed" | "timeout";

export class SessionClient {
  readonly id: string;
  readonly follower: Follower;
  readonly accepted: string[] = [];
  readonly expectIdle = new Set<string>();
  /** Requests answered with a status ≥ 500 (each one a violation). */
  readonly serverErrors: string[] = [];
  readonly #api: Api;
  readonly #token: string;

  private constructor(api: Api, token: string, id: string) {
    this.#api = api;
    this.#token = token;
    this.id = id;
    this.follower = new Follower({ base: api.base, session: id, token, gate: api.gate });
    this.follower.start();
  }

  static async create(api: Api, token: string): Promise<SessionClient> {
    const r = await request(api.base, "POST", "/sessions", token, { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: ["echo"] } });
    if (r.status !== 201) throw new Error(`create session gave ${r.status}: ${r.text.slice(0, 300)}`);
    return new SessionClient(api, token, (r.body as { id: string }).id);
  }

  /** Sends a message; resolves with its `user.message` id. `idle`: its turn must end idle. */
  async send(text: string, key: string, o: { idle?: boolean } = {}): Promise<string> {
    const r = await this.#retrying("POST", `/sessions/${this.id}/events`, { type: "user.message", text, key });
    if (r.status !== 202) throw new Error(`${this.id}: send gave ${r.status}: ${r.text.slice(0, 300)}`);
    const id = (r.body as { id: string }).id;
    this.accepted.push(id);
    if (o.idle) this.expectIdle.add(id);
    return id;
  }

  /** The first retained event of the turn of `input` among `types` (e.g. its `running` status). */
  async reached(input: string, types: readonly string[], timeoutMs: number): Promise<void> {
    await this.follower.waitFor((e) => e.input_id === input && types.includes(e.type), timeoutMs, `${types.join("/")} of turn ${input}`);
  }

  /** How the turn of `input` ended, as the stream tells it; `timeout` if it did not in time. */
  async ended(input: string, timeoutMs: number): Promise<TurnEnd> {
    const f = this.follower;
    try {
      const end = await f.waitFor(
        (e) => e.input_id === input && (e.type === "session.error" || (e.type === "session.status" && e.data.status === "idle")),
        timeoutMs,
        `end of turn ${input}`,
      );
      if (end.type !== "session.error") return "idle";
      const at = f.streamed.indexOf(end);
      const status = await f.waitFor((e) => e.type === "session.status" && f.streamed.indexOf(e) > at, timeoutMs, `status after the error of ${input}`);
      return status.data.status as TurnEnd;
    } catch {
      return "timeout";
    }
  }

  async resume(): Promise<void> {
    const r = await this.#retrying("POST", `/sessions/${this.id}/resume`);
    if (r.status !== 200) throw new Error(`${this.id}: resume gave ${r.status}: ${r.text.slice(0, 300)}`);
  }

  /** Stops following and reads the log and the session: what the judge needs. */
  async observe(): Promise<SessionObservation> {
    await this.follower.close();
    const log: Event[] = [];
    for (let after = ""; ; ) {
      const r = await this.#retrying("GET", `/sessions/${this.id}/events?limit=${PAGE}&after=${encodeURIComponent(after)}`);
      if (r.status !== 200) throw new Error(`${this.id}: events page gave ${r.status}: ${r.text.slice(0, 300)}`);
      const page = r.body as { events: Event[]; next_cursor: string };
      if (page.events.length === 0) break;
      log.push(...page.events);
      after = page.next_cursor;
    }
    const s = await this.#retrying("GET", `/sessions/${this.id}`);
    return {
      session: this.id,
      streamed: this.follower.streamed,
      accepted: this.accepted,
      log,
      finalStatus: String((s.body as { status?: string })?.status),
      expectIdle: this.expectIdle,
    };
  }

  async #retrying(method: string, path: string, body?: unknown): Promise<Reply> {
    let last: Reply | Error = new Error("not sent");
    for (let i = 0; i < ATTEMPTS; i++) {
      await this.#api.gate();
      try {
        last = await request(this.#api.base, method, path, this.#token, body);
        if (last.status >= 500) this.serverErrors.push(`${method} ${path} gave ${last.status}: ${last.text.slice(0, 200)}`);
        if (last.status !== 429) return last;
      } catch (e) {
        last = e as Error; // the connection failed: the service may be restarting
      }
      await sleep(ATTEMPT_GAP_MS);
    }
    if (last instanceof Error) throw new Error(`${method} ${path}: ${last.message}`);
    return last;
  }
}

type Reply = { status: number; body: unknown; text: string };

async function request(base: string, method: string, path: string, token: string, body?: unknown): Promise<Reply> {
  const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, body: parsed, text };
}
