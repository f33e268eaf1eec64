/**
 * Fuzz proof (no 5xx from any input): generated malformed requests against the real local stack —
 * bodies, cursors, headers, ids, query strings, methods, on every route. Asserts every request answered, none ≥ 500,
 * the process alive, and `/health/live` 200 afterwards.
 *
 * `npm test` runs a fast slice (SVC_FUZZ_RUNS, default 1,000); `npm run fuzz` runs 10,000.
 * Every run prints its seed; `SVC_FUZZ_SEED=<seed>` replays the same requests.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call } from "../helpers/api.ts";
import { REFERENCE_HARNESS_COMMAND, secret, startStack, type Stack } from "../helpers/stack.ts";
import { sendRaw, type RawResponse } from "./raw-http.ts";
import { requestArb, type RawRequest } from "./requests.ts";

/**
 * Methods HTTP defines. Any other name (`FOO`, lowercase `get`) is refused by the runtime's HTTP
 * server with a plain-text `501 Not Implemented` before the Worker runs; that answer is checked
 * (it is the runtime's, with no X-Request-ID) and counted apart from the service's own.
 */
const HTTP_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]);

const RUNS = Number(process.env.SVC_FUZZ_RUNS ?? 1_000);
const SEED = process.env.SVC_FUZZ_SEED ? Number(process.env.SVC_FUZZ_SEED) : Math.floor(Math.random() * 2 ** 31);
/** Requests in flight at once: enough to keep the stack busy on 2 cores without starving it. */
const CONCURRENCY = 8;
/** A request with no status line within this long is unanswered: a failure, like a 5xx or a close without an answer, ms. */
const ANSWER_MS = 20_000;

const sessionId = "5e55105e55105e55105e55105e551050";
const env = {
  MANAGE: secret("fz-manage"),
  READ: secret("fz-read"),
  SCOPED: secret("fz-scoped"),
  PLAIN: secret("fz-plain"),
  OTHER: secret("fz-other"),
  OPENAI_KEY: "sk-fuzz",
  CRED_KEY: Buffer.alloc(32, 7).toString("base64"),
};
const INPUT_BYTES = 4096;

let stack: Stack;
let targets: Parameters<typeof requestArb>[0];

beforeAll(async () => {
  stack = await startStack({
    config: {
      tokens: [
        { token_env: "MANAGE", tenant: "t1", manage: true },
        { token_env: "READ", tenant: "t1", read_only: true },
        { token_env: "SCOPED", tenant: "t1", session: sessionId, manage: true },
        { token_env: "PLAIN", tenant: "t1" },
        { token_env: "OTHER", tenant: "t2", manage: true },
      ],
      harnesses: { pi: { command: REFERENCE_HARNESS_COMMAND } },
      // Turns the fuzz starts fail fast: nothing listens on the discard port.
      providers: { openai: { api_key_env: "OPENAI_KEY", base_url: "http://127.0.0.1:9/v1", api: "openai-completions" } },
      tools: [{ name: "echo", description: "echo", input_schema: { type: "object" }, url: "http://127.0.0.1:9/echo", tenants: ["t1"] }],
      credential_keys: { active: "k1", keys: { k1: "CRED_KEY" } },
      limits: { input_bytes: INPUT_BYTES, queue: 4 },
    },
    env,
  });
  const sessions: string[] = [];
  const cursors: string[] = [];
  for (const token of [env.MANAGE, env.MANAGE, env.OTHER]) {
    const s = await call(stack.url, "POST", "/sessions", { token, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } });
    expect(s.status).toBe(201);
    sessions.push(s.body.id);
    const m = await call(stack.url, "POST", `/sessions/${s.body.id}/events`, { token, body: { type: "user.message", text: "seed" } });
    cursors.push(m.body.cursor);
  }
  targets = { tokens: [env.MANAGE, env.READ, env.SCOPED, env.PLAIN, env.OTHER], sessions: [...sessions, sessionId], cursors, bodyCap: INPUT_BYTES + 16_384 };
});
afterAll(async () => {
  await stack?.stop();
});

function describeRequest(r: RawRequest): string {
  const body = Buffer.from(r.body.subarray(0, 200)).toString("latin1");
  return `${r.method} ${r.target.slice(0, 200)} [${r.kind}] ${JSON.stringify(r.headers.map(([k, v]) => `${k}: ${v.slice(0, 60)}`))} body(${r.body.length}): ${JSON.stringify(body)}`;
}

describe("fuzz: malformed requests on every route", () => {
  it(`answers ${RUNS} generated requests with no 5xx, stays alive, and /health/live is 200 after`, { timeout: 30 * 60_000 }, async () => {
    console.log(`fuzz: seed ${SEED}, ${RUNS} requests (replay: SVC_FUZZ_SEED=${SEED} SVC_FUZZ_RUNS=${RUNS})`);
    const requests = fc.sample(requestArb(targets), { seed: SEED, numRuns: RUNS });
    const { hostname, port } = new URL(stack.url);
    const byStatus = new Map<string, number>();
    const failures: string[] = [];
    let next = 0;
    const worker = async () => {
      while (next < requests.length) {
        const r = requests[next++]!;
        const res: RawResponse = await sendRaw(hostname, Number(port), r, ANSWER_MS);
        const runtime501 = res.status === 501 && !HTTP_METHODS.has(r.method) && !/x-request-id/i.test(res.head);
        // The runtime refuses a method HTTP does not define (501) or a request line with a space or
        // control character in its target (400) itself, leaving a chunked body unread, and the reset
        // that follows can beat its answer: that request never reached the service.
        const runtimeRefused = !HTTP_METHODS.has(r.method) || /[\s\x00-\x1f\x7f]/.test(r.target);
        const runtimeReset = res.status === undefined && runtimeRefused && res.ms < ANSWER_MS;
        const key = runtime501 ? "501 (runtime, unknown method)" : runtimeReset ? "none (runtime refusal, reset)" : String(res.status ?? "none");
        byStatus.set(key, (byStatus.get(key) ?? 0) + 1);
        if (res.status === undefined && !runtimeReset) failures.push(`no answer (the connection closed, or none within ${ANSWER_MS} ms) ← ${describeRequest(r)}`);
        else if (res.status !== undefined && res.status >= 500 && !runtime501) failures.push(`${res.status} ← ${describeRequest(r)}\n${res.head.slice(0, 500)}`);
      }
    };
    const t0 = performance.now();
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const secs = (performance.now() - t0) / 1000;
    console.log(`fuzz: ${RUNS} requests in ${secs.toFixed(1)} s; by status: ${JSON.stringify(Object.fromEntries([...byStatus].sort()))}`);
    expect(failures, `seed ${SEED}: responses ≥ 500 or none\n${failures.slice(0, 10).join("\n\n")}`).toEqual([]);
    expect(stack.child.exitCode).toBeNull();
    expect(stack.child.signalCode).toBeNull();
    const live = await fetch(`${stack.url}/health/live`);
    expect(live.status).toBe(200);
    expect(await live.json()).toEqual({ status: "ok" });
  });
});
