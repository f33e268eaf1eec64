/**
 * Helpers for the workers-pool tests: the configured tokens, HTTP calls through the Worker's own
 * `exports.default.fetch`, SessionObject stubs, a message queue over a subscribe socket, and a raw
 * SSE frame reader. Every wait has a timeout that rejects with context; nothing sleeps.
 */
import { env as cloudflareEnv, exports } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { expect } from "vitest";
import type { Env } from "../../src/env.ts";
import type { Event, Session } from "../../src/shared/api-schema.ts";
import type { Result } from "../../src/shared/errors.ts";
import type { SubscribeDown } from "../../src/shared/subscribe-protocol.ts";
import { newId } from "../../src/shared/ids.ts";
import type { NewEvent } from "../../src/session/event-log.ts";
import { SessionState } from "../../src/session/session-state.ts";
import type { NewSession } from "../../src/session/record.ts";
import { sessionObjectName } from "../../src/session/session-object.ts";
import { POOL_NAME } from "../../src/runner/pool-name.ts";
import { RUNNER_PROTOCOL, type Capacity } from "../../src/shared/runner-protocol.ts";

/**
 * The pool's bindings with the Worker's own Env type (`Cloudflare.Env` from env.d.ts types every
 * binding as unknown: `Omit<Env, never>` over Env's `Record<string, unknown>` index signature).
 */
export const env = cloudflareEnv as unknown as Env;

export const TENANT = "acme";

/** The secrets bound in test/vitest.config.mts (worker project). */
export const tokens = {
  manage: env.TOKEN_MANAGE as string,
  read: env.TOKEN_READ as string,
  other: env.TOKEN_OTHER as string,
};

export const BASE = "https://svc.test";

export function api(path: string, init: RequestInit & { token?: string } = {}): Promise<Response> {
  const { token = tokens.manage, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (token !== "") headers.set("Authorization", `Bearer ${token}`);
  if (rest.body !== undefined && !headers.has("Content-Type")) headers.set("Content-Type", "application/json");
  return exports.default.fetch(`${BASE}${path}`, { ...rest, headers });
}

export const createBody = (over: Record<string, unknown> = {}) => ({
  harness: "pi",
  config: { model: "openai/gpt-test", tools: [] },
  ...over,
});

export async function createSession(): Promise<Session> {
  const res = await api("/sessions", { method: "POST", body: JSON.stringify(createBody()) });
  expect(res.status).toBe(201);
  return (await res.json()) as Session;
}

export async function sendMessage(id: string, text: string): Promise<Event> {
  const res = await api(`/sessions/${id}/events`, { method: "POST", body: JSON.stringify({ type: "user.message", text }) });
  expect(res.status).toBe(202);
  return (await res.json()) as Event;
}

/** Checks the HTTP error body (docs/api.md "Errors"), and that `request_id` is the 32-hex `X-Request-ID`. */
export async function expectApiError(res: Response, status: number, code: string): Promise<{ code: string; message: string }> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  const body = JSON.parse(text) as { error: { code: string; message: string }; request_id: string };
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe("string");
  expect(body.request_id).toMatch(/^[0-9a-f]{32}$/);
  expect(res.headers.get("X-Request-ID")).toBe(body.request_id);
  return body.error;
}

/** A fresh SessionObject (its own name) and the NewSession it can be created with. */
export function freshSession(over: Partial<NewSession> = {}) {
  const n: NewSession = {
    id: newId(),
    tenant: TENANT,
    harness: "pi",
    config: { model: "openai/gpt-test", tools: [] },
    descriptors: [],
    credentials: [],
    ...over,
  };
  return { n, stub: env.SESSIONS.getByName(sessionObjectName(n.tenant, n.id)) };
}

export function sessionStub(id: string, tenant = TENANT) {
  return env.SESSIONS.getByName(sessionObjectName(tenant, id));
}

export type Stub = ReturnType<typeof sessionStub>;

/**
 * The value of an object RPC Result, or a failure naming the error. The stub's own typing cannot be
 * used: workers-types turns `Result<Session>` into its error branch only (Session holds
 * `Record<string, unknown>` JSON Schemas, which Rpc.Serializable maps to never), so callers name T.
 */
export function ok<T = unknown>(r: unknown): T {
  const x = r as Result<T>;
  if (!x.ok) throw new Error(`expected ok, got ${x.error.code}: ${x.error.message}`);
  return x.value;
}

/**
 * Appends retained records straight into an object's log, as a turn would, keeping `log_bytes` in
 * step. Nothing is published: subscribers see these only by replay.
 */
export function appendRecords(stub: Stub, records: NewEvent[], time = new Date().toISOString()) {
  return runInDurableObject(stub, (_, state) => {
    // Through a SessionState over the object's storage: it shares the object's cached session row.
    const s = new SessionState(state.storage);
    return s.storage.transactionSync(() =>
      records.map((r) => {
        const logged = s.append(r, time);
        return { seq: logged.seq, event: logged.event, endOffset: logged.endOffset };
      }),
    );
  });
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** The client end of a subscribe socket, with its messages queued for `next()`. */
export type Subscriber = {
  ws: WebSocket;
  next(what?: string, ms?: number): Promise<SubscribeDown>;
  /** Resolves with the close code once the object closes the socket. */
  closed: Promise<number>;
  more(): void;
};

export async function subscribe(stub: { fetch(input: string, init?: RequestInit): Promise<Response> }, after = ""): Promise<Subscriber> {
  const res = await stub.fetch(`https://session/subscribe?after=${encodeURIComponent(after)}`, { headers: { Upgrade: "websocket" } });
  expect(res.status, res.status === 101 ? "" : await res.text()).toBe(101);
  const ws = res.webSocket!;
  ws.accept();
  const queue: SubscribeDown[] = [];
  const waiters: ((m: SubscribeDown) => void)[] = [];
  ws.addEventListener("message", (m) => {
    const msg = JSON.parse(typeof m.data === "string" ? m.data : new TextDecoder().decode(m.data)) as SubscribeDown;
    const w = waiters.shift();
    if (w) w(msg);
    else queue.push(msg);
  });
  const closed = new Promise<number>((resolve) => ws.addEventListener("close", (e) => resolve(e.code)));
  return {
    ws,
    closed,
    more: () => ws.send("more"),
    next(what = "a subscribe message", ms = 5_000) {
      const m = queue.shift();
      if (m) return Promise.resolve(m);
      return withTimeout(new Promise<SubscribeDown>((resolve) => waiters.push(resolve)), ms, what);
    },
  };
}

/** One SSE frame as written: its field lines in order, and the parsed fields. */
export type RawFrame = { lines: string[]; id?: string; event?: string; data?: string; comment?: string };

/** Reads SSE frames off a response body exactly as framed on the wire. */
export function sseReader(body: ReadableStream<Uint8Array>) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let ended = false;
  const parse = (block: string): RawFrame => {
    const lines = block.split("\n");
    const f: RawFrame = { lines };
    for (const l of lines) {
      if (l.startsWith(":")) f.comment = l.slice(1).trim();
      else if (l.startsWith("id: ")) f.id = l.slice(4);
      else if (l.startsWith("event: ")) f.event = l.slice(7);
      else if (l.startsWith("data: ")) f.data = l.slice(6);
    }
    return f;
  };
  const pull = async (): Promise<RawFrame | undefined> => {
    for (;;) {
      const at = buffer.indexOf("\n\n");
      if (at >= 0) {
        const block = buffer.slice(0, at);
        buffer = buffer.slice(at + 2);
        return parse(block);
      }
      if (ended) return undefined;
      const { done, value } = await reader.read();
      if (done) ended = true;
      else buffer += decoder.decode(value, { stream: true });
    }
  };
  return {
    /** The next frame, or undefined when the stream ended; rejects if the stream errored. */
    next(what = "an SSE frame", ms = 5_000) {
      return withTimeout(pull(), ms, what);
    },
    cancel: () => reader.cancel().catch(() => {}),
  };
}

/** A runner-host's control socket, opened straight on a RunnerPool (default: the default region's), answered by `welcome`. */
export async function connectRunner(o: { capacity: Capacity; draining?: boolean; runnerId?: string; pool?: DurableObjectStub }): Promise<WebSocket> {
  const res = await (o.pool ?? env.RUNNERS.getByName(POOL_NAME)).fetch("https://pool/control", { headers: { Upgrade: "websocket" } });
  const ws = res.webSocket!;
  ws.accept();
  const welcome = new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("no welcome from the pool")), 5_000);
    ws.addEventListener("message", (e) => {
      if (JSON.parse(e.data as string).t === "welcome") (clearTimeout(t), resolve());
    });
  });
  const hello = { t: "hello", protocol: RUNNER_PROTOCOL, runner_id: o.runnerId ?? "a".repeat(32), boot: "b".repeat(32), harnesses: ["pi"], draining: o.draining ?? false, capacity: o.capacity };
  ws.send(JSON.stringify(hello));
  await welcome;
  return ws;
}
