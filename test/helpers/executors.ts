/**
 * Real executor clients for tests and benchmarks, speaking the service's executor contract:
 * - `sseExecutor`: `GET /executors/{id}/commands` read with fetch + eventsource-parser, replies
 *   over `POST /executors/{id}/responses`;
 * - `rpcExecutor`: one `ws` WebSocket on `/executors/{id}/rpc` with the `svc-rpc` and
 *   `svc-auth.<token>` subprotocols, commands and replies as JSON text messages.
 * Both record every command, and run `onCall` (when given) for each `call`.
 */
import { EventSourceParserStream } from "eventsource-parser/stream";
import WebSocket from "ws";
import type { Command, Reply } from "../../src/shared/executor-protocol.ts";

export type ReplyBody = Omit<Reply, "connection"> & { connection?: string };
export type ReplyOutcome = { status: number; body: any };
export type CallCommand = Extract<Command, { type: "call" }>;

export type Executor = {
  id: string;
  token: string;
  /** The `ready` command's connection identity. */
  connection: string;
  commands: Command[];
  /** Frames as framed on the wire (SSE only): `id` must be absent on every one. */
  frames: { id?: string; event?: string }[];
  /** RPC error messages received (RPC only). */
  errors: any[];
  waitFor(pred: (c: Command) => boolean, timeoutMs?: number): Promise<Command>;
  /** Sends a reply on this connection (or the one given); resolves with the outcome. */
  reply(r: ReplyBody): Promise<ReplyOutcome>;
  /** Ends when the server ends the stream / closes the socket. */
  ended: Promise<void>;
  drop(): void;
};

export type ExecutorOptions = { onCall?: (call: CallCommand, ex: Executor) => void };

/** Registers an executor with a management token; returns the credential. */
export async function registerExecutor(base: string, token: string, body: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/executors`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

function waiter(commands: Command[]) {
  const waiters: { pred: (c: Command) => boolean; resolve(c: Command): void }[] = [];
  return {
    push(c: Command) {
      commands.push(c);
      for (const w of [...waiters]) if (w.pred(c)) (waiters.splice(waiters.indexOf(w), 1), w.resolve(c));
    },
    waitFor(pred: (c: Command) => boolean, timeoutMs = 20_000): Promise<Command> {
      const seen = commands.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`timed out waiting for a command; got ${commands.map((c) => c.type).join(",")}`)), timeoutMs);
        waiters.push({ pred, resolve: (c) => (clearTimeout(t), resolve(c)) });
      });
    },
  };
}

export async function sseExecutor(base: string, cred: { id: string; token: string }, o: ExecutorOptions = {}): Promise<Executor> {
  const ctl = new AbortController();
  const res = await fetch(`${base}/executors/${cred.id}/commands`, { headers: { Authorization: `Bearer ${cred.token}` }, signal: ctl.signal });
  if (res.status !== 200 || !res.body) throw new Error(`command stream refused: ${res.status} ${await res.text()}`);
  const commands: Command[] = [];
  const w = waiter(commands);
  let endedResolve!: () => void;
  const ended = new Promise<void>((r) => (endedResolve = r));
  const ex: Executor = {
    ...cred,
    connection: "",
    commands,
    frames: [],
    errors: [],
    waitFor: w.waitFor,
    ended,
    drop: () => ctl.abort(),
    async reply(r) {
      const body = { connection: ex.connection, ...r };
      const res = await fetch(`${base}/executors/${cred.id}/responses`, {
        method: "POST",
        headers: { Authorization: `Bearer ${cred.token}`, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: await res.json() };
    },
  };
  const reader = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  let readyResolve!: () => void;
  const ready = new Promise<void>((r) => (readyResolve = r));
  void (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        ex.frames.push({ id: value.id, event: value.event });
        const c = JSON.parse(value.data) as Command;
        if (c.type === "ready") {
          ex.connection = c.connection;
          readyResolve();
        }
        w.push(c);
        if (c.type === "call") o.onCall?.(c, ex);
      }
    } catch {
      // Dropped by the test or cut off by the server.
    }
    endedResolve();
  })();
  await ready;
  return ex;
}

export type RpcExecutor = Executor & {
  protocol: string;
  send(raw: string | Uint8Array): void;
  waitError(pred: (e: any) => boolean, timeoutMs?: number): Promise<any>;
  /** Closes the socket with `code`; resolves with the code of the close as `ws` saw it (`1006`: no Close frame came back). */
  close(code: number): Promise<number>;
};

export async function rpcExecutor(base: string, cred: { id: string; token: string }, o: ExecutorOptions = {}): Promise<RpcExecutor> {
  const ws = new WebSocket(`${base.replace(/^http/, "ws")}/executors/${cred.id}/rpc`, ["svc-rpc", `svc-auth.${cred.token}`]);
  const commands: Command[] = [];
  const w = waiter(commands);
  const errors: any[] = [];
  const errorWaiters: ((e: any) => boolean)[] = [];
  let readyResolve!: () => void;
  const ready = new Promise<void>((r) => (readyResolve = r));
  const closedWith = new Promise<number>((r) => ws.once("close", (code) => r(code)));
  const ended = closedWith.then(() => {});
  const ex: RpcExecutor = {
    ...cred,
    connection: "",
    protocol: "",
    commands,
    frames: [],
    errors,
    waitFor: w.waitFor,
    ended,
    drop: () => ws.terminate(),
    /** RPC replies are not acknowledged: success is seen in the session's events, failure as an error message. */
    reply(r: ReplyBody): Promise<ReplyOutcome> {
      ws.send(JSON.stringify({ connection: ex.connection, ...r }));
      return Promise.resolve({ status: 0, body: undefined });
    },
    send(raw: string | Uint8Array): void {
      ws.send(raw);
    },
    close(code: number): Promise<number> {
      ws.close(code);
      return closedWith;
    },
    waitError(pred: (e: any) => boolean, timeoutMs = 20_000): Promise<any> {
      const seen = errors.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`timed out waiting for an error message; got ${JSON.stringify(errors)}`)), timeoutMs);
        errorWaiters.push((e) => {
          if (!pred(e)) return false;
          clearTimeout(t);
          resolve(e);
          return true;
        });
      });
    },
  };
  ws.on("message", (data) => {
    const m = JSON.parse(data.toString());
    if (m.error) {
      errors.push(m);
      for (const fn of [...errorWaiters]) if (fn(m)) errorWaiters.splice(errorWaiters.indexOf(fn), 1);
      return;
    }
    const c = m as Command;
    if (c.type === "ready") {
      ex.connection = c.connection;
      ex.protocol = ws.protocol;
      readyResolve();
    }
    w.push(c);
    if (c.type === "call") o.onCall?.(c, ex);
  });
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
    ws.once("unexpected-response", (_req, res) => reject(new Error(`rpc upgrade refused: ${res.statusCode}`)));
  });
  await ready;
  return ex;
}
