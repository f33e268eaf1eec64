/**
 * Shared pieces of the benchmarks: one HTTP client used for BOTH columns (the service and the
 * scripted provider read directly), the scripted provider as its own process, the local stack,
 * /proc readings, stats, and a watchdog that stops everything started.
 *
 * The client is deliberately lean (keep-alive node:http, SSE split by index, one JSON.parse per
 * event), the same for every column, so a ratio measures the server. fetch + a TransformStream
 * parser costs several times more client CPU per event; on 2 cores that CPU is taken from the
 * server under test and would blur both columns toward the client's own limit.
 */
import { rmSync } from "node:fs";
import http from "node:http";
import { spawn, type ChildProcess } from "node:child_process";
import { buildHarness } from "../scripts/build-harness.ts";
import { REFERENCE_HARNESSES, ROOT, secret, startStack, type Stack } from "../test/helpers/stack.ts";

export * from "./proc.ts";

export const now = () => performance.now();
export const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 256 });

/** Called per SSE event with the arrival time; "stop" drops the response. */
export type OnEvent = (event: string, data: string, t: number) => void | "stop";
export type SseHandle = { ready: Promise<number>; done: Promise<{ bytes: number; tEnd: number }>; bytes(): number; close(): void };

/** A JSON request on the shared agent; resolves { status, body }. */
export function request(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const h: Record<string, string | number> = { ...headers };
    if (payload) Object.assign(h, { "content-type": "application/json", "content-length": Buffer.byteLength(payload) });
    const req = http.request(url, { method, agent, headers: h }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c));
      res.on("end", () => {
        const text = Buffer.concat(parts).toString("utf8");
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {}
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
      res.on("error", reject);
    });
    req.setTimeout(60_000, () => req.destroy(new Error(`idle timeout ${method} ${url}`)));
    req.on("error", reject);
    req.end(payload);
  });
}

/** Opens an SSE response (GET stream or POST completion) and feeds every event to onEvent. */
export function sse(method: string, url: string, body: unknown, headers: Record<string, string>, onEvent: OnEvent): SseHandle {
  let bytes = 0;
  let req: http.ClientRequest;
  let res: http.IncomingMessage | undefined;
  let stopped = false;
  let markReady!: (s: number) => void;
  let failReady!: (e: Error) => void;
  const ready = new Promise<number>((a, b) => ((markReady = a), (failReady = b)));
  const done = new Promise<{ bytes: number; tEnd: number }>((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const h: Record<string, string | number> = { ...headers, accept: "text/event-stream" };
    if (payload) Object.assign(h, { "content-type": "application/json", "content-length": Buffer.byteLength(payload) });
    req = http.request(url, { method, agent, headers: h }, (r) => {
      res = r;
      if (r.statusCode !== 200) {
        const e = new Error(`HTTP ${r.statusCode} ${method} ${url}`);
        failReady(e);
        r.resume();
        return reject(e);
      }
      markReady(200);
      r.setEncoding("utf8");
      let buf = "";
      r.on("data", (chunk: string) => {
        if (stopped) return;
        const t = now();
        bytes += Buffer.byteLength(chunk);
        buf += chunk;
        let start = 0;
        let end: number;
        while ((end = buf.indexOf("\n\n", start)) !== -1) {
          const ev = parseBlock(buf, start, end);
          start = end + 2;
          if (ev && onEvent(ev.event, ev.data, t) === "stop") {
            stopped = true;
            r.destroy();
            return resolve({ bytes, tEnd: now() });
          }
        }
        if (start > 0) buf = buf.slice(start);
      });
      r.on("end", () => resolve({ bytes, tEnd: now() }));
      r.on("error", (e) => (stopped ? resolve({ bytes, tEnd: now() }) : reject(e)));
    });
    req.on("error", (e) => (stopped ? resolve({ bytes, tEnd: now() }) : (failReady(e), reject(e))));
    req.end(payload);
  });
  done.catch(() => {});
  ready.catch(() => {});
  return {
    ready,
    done,
    bytes: () => bytes,
    close() {
      stopped = true;
      res?.destroy();
      req?.destroy();
    },
  };
}

/** One event block buf[start, end): data lines joined with \n; comment-only blocks (keepalives) → undefined. */
function parseBlock(buf: string, start: number, end: number): { event: string; data: string } | undefined {
  let event = "message";
  let data: string | undefined;
  for (let i = start; i < end; ) {
    let nl = buf.indexOf("\n", i);
    if (nl === -1 || nl > end) nl = end;
    if (buf.startsWith("data:", i)) {
      const v = buf.slice(i + (buf.charCodeAt(i + 5) === 32 ? 6 : 5), nl);
      data = data === undefined ? v : `${data}\n${v}`;
    } else if (buf.startsWith("event:", i)) event = buf.slice(i + 6, nl).trim();
    i = nl + 1;
  }
  return data === undefined ? undefined : { event, data };
}

/** p50 is the true median; other quantiles nearest-rank. */
export function stats(xs: number[]) {
  const v = xs.filter(Number.isFinite).sort((a, b) => a - b);
  const q = (p: number) => v[Math.min(v.length - 1, Math.max(0, Math.ceil(p * v.length) - 1))]!;
  const mid = v.length >> 1;
  const p50 = v.length === 0 ? NaN : v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
  return { n: v.length, p50, p99: v.length ? q(0.99) : NaN, min: v[0] ?? NaN, max: v[v.length - 1] ?? NaN };
}
export const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "n/a");

// ---------- processes we start, and stopping them ----------

const cleanups: (() => Promise<void>)[] = [];

/**
 * Runs the benchmark with a watchdog: on timeout, error, SIGINT or SIGTERM every process started
 * through this file is stopped (by its own PID / process group) before exiting.
 */
export async function runBench(maxMs: number, main: () => Promise<void>): Promise<void> {
  let code = 0;
  const bail = (why: string) => {
    process.stderr.write(`bench: ${why}; stopping everything\n`);
    void cleanup().then(() => process.exit(2));
  };
  const dog = setTimeout(() => bail(`over ${maxMs / 1000} s`), maxMs);
  process.once("SIGINT", () => bail("SIGINT"));
  process.once("SIGTERM", () => bail("SIGTERM"));
  try {
    await main();
  } catch (e) {
    process.stderr.write(`bench failed: ${(e as Error).stack ?? e}\n`);
    code = 1;
  }
  clearTimeout(dog);
  await cleanup();
  agent.destroy();
  process.exit(code);
}

/** Runs `fn` when the bench ends, after everything started later than this call was stopped. */
export const atCleanup = (fn: () => Promise<void> | void) => void cleanups.push(async () => fn());

async function cleanup(): Promise<void> {
  while (cleanups.length) await cleanups.pop()!().catch(() => {});
}

/**
 * A server under test in its own process group (it may start children: workerd, workers), so it
 * never shares the client's event loop and stopping the group stops everything it started. Resolves
 * with the URL from the first `{"event":"listening","url":...}` line it prints on stdout; its other
 * output is drained (kept only as a tail for errors). Stopped by `runBench`'s cleanup, and killed
 * outright if this process exits without it.
 */
export async function startServerProcess(name: string, args: string[], env: Record<string, string> = {}, timeoutMs = 60_000): Promise<{ url: string; pid: number; tail(): string }> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], detached: true });
  const pid = child.pid!;
  const killGroup = (sig: NodeJS.Signals) => {
    try {
      process.kill(-pid, sig);
    } catch {}
  };
  const onExit = () => killGroup("SIGKILL");
  process.once("exit", onExit);
  cleanups.push(async () => {
    process.off("exit", onExit);
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child.once("exit", r));
      killGroup("SIGTERM");
      const t = setTimeout(() => killGroup("SIGKILL"), 5000);
      await gone;
      clearTimeout(t);
    }
    killGroup("SIGKILL"); // anything the server left in its group
  });
  let tail = "";
  const keep = (d: string) => (tail = (tail + d).slice(-4000));
  child.stderr!.setEncoding("utf8").on("data", keep);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within ${timeoutMs} ms: ${tail}`)), timeoutMs);
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      keep(d);
      const m = /\{"event":"listening","url":"([^"]+)"\}/.exec(tail);
      if (m) (clearTimeout(timer), resolve(m[1]!));
    });
    child.once("exit", (c) => (clearTimeout(timer), reject(new Error(`${name} exited (${c}) before listening: ${tail}`))));
  });
  return { url, pid, tail: () => tail };
}

/**
 * `conc` closed loops of `fn` (loop index → one turn) for `windowMs` after `warmMs`: the standard
 * closed-loop throughput. Only turns that END inside the window count; latency is request → end of
 * each such turn. A failed turn is recorded and its loop goes on after 50 ms (no busy loop).
 */
export async function closedLoop(
  conc: number,
  warmMs: number,
  windowMs: number,
  fn: (w: number) => Promise<unknown>,
  /**
   * Called as the counted window opens and closes (e.g. CPU readings over exactly the window);
   * each exactly once, in that order, even when the loop's event loop ran the timers late.
   */
  window: { open?: () => void; close?: () => void } = {},
) {
  const tStart = now() + warmMs;
  const tStop = tStart + windowMs;
  let phase = 0; // 0: before the window, 1: in it, 2: after it
  const open = () => phase === 0 && ((phase = 1), window.open?.());
  const close = () => (open(), phase === 1 && ((phase = 2), window.close?.()));
  const opened = setTimeout(open, warmMs);
  const closed = setTimeout(close, warmMs + windowMs);
  const lat: number[] = [];
  const errors: string[] = [];
  await Promise.all(
    Array.from({ length: conc }, async (_, w) => {
      while (now() < tStop) {
        const t0 = now();
        try {
          await fn(w);
          const t1 = now();
          if (t1 >= tStart && t1 <= tStop) lat.push(t1 - t0);
        } catch (e) {
          errors.push(String((e as Error).message).slice(0, 200));
          await sleep(50);
        }
      }
    }),
  );
  clearTimeout(opened);
  clearTimeout(closed);
  close();
  return { perS: lat.length / (windowMs / 1000), lat: stats(lat), samples: lat, errors };
}

/** The project's scripted provider in its own process, so it never shares the client's event loop. */
export async function startProvider(): Promise<{ url: string; pid: number }> {
  const child: ChildProcess = spawn(process.execPath, [`${ROOT}examples/scripted-provider.ts`, "--port", "0", "--host", "127.0.0.1"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  cleanups.push(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    const t = setTimeout(() => child.kill("SIGKILL"), 3000);
    await gone;
    clearTimeout(t);
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      const m = /"url":"([^"]+)"/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once("exit", (c) => reject(new Error(`scripted provider exited (${c})`)));
  });
  return { url, pid: child.pid! };
}

export const TOKEN = secret("bench");
export const auth = { authorization: `Bearer ${TOKEN}` };
const defaultAuth = auth;
await buildHarness(); // the benchmarks measure the current sources, never an older build
/**
 * The reference harness command. BENCH_HARNESS_COMMAND (a JSON array) replaces it, to measure a
 * variant: Node/V8 flags, or the `.ts` sources run directly.
 */
export const harnessCommand: string[] = process.env.BENCH_HARNESS_COMMAND
  ? JSON.parse(process.env.BENCH_HARNESS_COMMAND)
  : REFERENCE_HARNESSES.pi.command;

/** The real local stack (`svc -config`) pointed at the scripted provider; stopped at the end. */
export async function startBenchStack(
  providerUrl: string,
  harnesses: Record<string, unknown>,
  limits: Record<string, number> = {},
  more: {
    config?: Record<string, unknown>;
    env?: Record<string, string>;
    runner?: boolean;
    /** Further tenants `bench1`…`benchN`, each with its own token (`tenantAuth(i)`). */
    tenants?: number;
  } = {},
): Promise<Stack> {
  const extra = Array.from({ length: more.tenants ?? 0 }, (_, i) => i + 1);
  const stack = await startStack(
    {
      config: {
        tokens: [{ token_env: "TOKEN", tenant: "bench", manage: true }, ...extra.map((i) => ({ token_env: `TOKEN_${i}`, tenant: `bench${i}`, manage: true }))],
        harnesses,
        providers: { openai: { api_key_env: "KEY", base_url: providerUrl, api: "openai-completions" } },
        limits,
        ...more.config,
      },
      env: { TOKEN, KEY: "sk-bench", ...Object.fromEntries(extra.map((i) => [`TOKEN_${i}`, tenantToken(i)])), ...more.env, ...(process.env.SVC_DEBUG ? { SVC_DEBUG: "1" } : {}) },
      runner: more.runner,
    },
    60_000,
  );
  cleanups.push(async () => {
    // Graceful drain first (bounded by svc itself at ~20 s), then the whole process group.
    const t = setTimeout(() => void stack.crash(), 25_000);
    await stack.stop();
    clearTimeout(t);
    try {
      process.kill(-stack.child.pid!, "SIGKILL"); // anything left in the stack's own group
    } catch {}
    rmSync(stack.dir, { recursive: true, force: true }); // its config and data_dir: nothing of a bench run stays behind
  });
  return stack;
}

const tenantToken = (i: number) => secret(`bench${i}`);
/** Authorization of tenant `bench<i>` (see `startBenchStack`'s `tenants`). */
export const tenantAuth = (i: number) => ({ authorization: `Bearer ${tenantToken(i)}` });

/** Session API shortcuts on the shared client (as the `bench` tenant unless `auth` says otherwise). */
export function api(base: string, auth: Record<string, string> = defaultAuth) {
  return {
    async create(harness: string): Promise<string> {
      const r = await request("POST", `${base}/sessions`, { harness, config: { model: "openai/gpt-4o-mini", tools: [] } }, auth);
      if (r.status !== 201) throw new Error(`create: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.id;
    },
    async send(id: string, text: string): Promise<string> {
      const r = await request("POST", `${base}/sessions/${id}/events`, { type: "user.message", text }, auth);
      if (r.status !== 202) throw new Error(`send: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.id;
    },
    close: (id: string) => request("POST", `${base}/sessions/${id}/close`, {}, auth),
    stream: (id: string, onEvent: OnEvent) => sse("GET", `${base}/sessions/${id}/events`, undefined, auth, onEvent),
  };
}

/** The provider read directly by the same client: a streaming chat-completions POST. */
export function direct(providerUrl: string, text: string, onContent: (t: number) => void): Promise<{ bytes: number; tEnd: number; deltas: number; text: string }> {
  let deltas = 0;
  const parts: string[] = [];
  const body = { model: "gpt-4o-mini", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: text }] };
  const h = sse("POST", `${providerUrl}/chat/completions`, body, {}, (_e, data, t) => {
    if (data === "[DONE]") return;
    const content = JSON.parse(data).choices?.[0]?.delta?.content;
    if (content) {
      deltas++;
      parts.push(content);
      onContent(t);
    }
  });
  return h.done.then((r) => ({ ...r, deltas, text: parts.join("") }));
}

/** The text the scripted provider streams for `[[deltas n size=4]]`: delta i is letter i mod 26, 4 times. */
export const scriptedText = (n: number) => Array.from({ length: n }, (_, i) => String.fromCharCode(97 + (i % 26)).repeat(4)).join("");

export const sleep = (msec: number) => new Promise((r) => setTimeout(r, msec));

/**
 * One measured turn on any path, ms from just before its request: first text, last text, and the
 * path's own end signal (stream closed, idle frame, done frame); `text` is every text delta joined,
 * checked against the provider's script by the caller.
 */
export type Turn = { firstMs: number; lastMs: number; endMs: number; text: string };
