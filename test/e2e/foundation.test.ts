/**
 * The foundation end to end: the real local stack (Miniflare + in-process runner-host) driven over
 * HTTP — the auth matrix, every creation rule, paging, tenant isolation, restart persistence.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, expectApiError, expectStandardHeaders } from "../helpers/api.ts";
import { commandOf, processTree } from "../helpers/process.ts";
import { REFERENCE_HARNESS_COMMAND, secret, startStack, type Stack } from "../helpers/stack.ts";
import { runSvc } from "../helpers/svc-command.ts";

const env = {
  ACME_MANAGE: secret("acme-manage"),
  ACME_READ: secret("acme-read"),
  ACME_WRITE: secret("acme-write"),
  ACME_BOTH: secret("acme-both"),
  GLOBEX_MANAGE: secret("globex-manage"),
  OPENAI_KEY: "sk-test-openai",
};

const tools = [
  { name: "lookup", description: "Look a thing up", input_schema: { type: "object" }, url: "http://127.0.0.1:9/lookup", tenants: ["acme"] },
  {
    name: "shared_tool",
    description: "Both tenants",
    input_schema: { type: "object", properties: { q: { type: "string" } } },
    output_schema: { type: "object" },
    url: "http://127.0.0.1:9/shared",
    tenants: ["acme", "globex"],
    token_env: "OPENAI_KEY",
  },
  { name: "globex_only", description: "Globex", input_schema: { type: "object" }, url: "http://127.0.0.1:9/g", tenants: ["globex"] },
];

function config(extraTokens: object[] = []) {
  return {
    tokens: [
      { token_env: "ACME_MANAGE", tenant: "acme", manage: true },
      { token_env: "ACME_READ", tenant: "acme", read_only: true },
      { token_env: "ACME_WRITE", tenant: "acme" },
      { token_env: "ACME_BOTH", tenant: "acme", manage: true, read_only: true },
      { token_env: "GLOBEX_MANAGE", tenant: "globex", manage: true },
      ...extraTokens,
    ],
    harnesses: { pi: { command: REFERENCE_HARNESS_COMMAND } },
    providers: { openai: { api_key_env: "OPENAI_KEY" } },
    tools,
    limits: { input_bytes: 1024 },
  };
}

const create = (s: Stack, token: string, body: unknown) => call(s.url, "POST", "/sessions", { token, body });
const basic = { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } };

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ config: config(), env });
});
afterAll(async () => {
  await stack?.stop();
});

describe("health", () => {
  it("/health/live returns 200 ok without authentication", async () => {
    const r = await call(stack.url, "GET", "/health/live");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: "ok" });
    expectStandardHeaders(r);
  });

  it("/health/ready returns 200 ready while a runner-host is connected", async () => {
    const r = await call(stack.url, "GET", "/health/ready");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: "ready" });
  });
});

describe("start-up", () => {
  it("svc exits 1 with its error when its listen address is in use (it does not hang)", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "svc-in-use-"));
    const configPath = path.join(dir, "config.json");
    writeFileSync(configPath, JSON.stringify({ ...config(), listen: new URL(stack.url).host, data_dir: path.join(dir, "data") }));
    const r = await runSvc(["-config", configPath], { env });
    expect(r.code).toBe(1);
    const line = JSON.parse(r.stderr.trim().split("\n").at(-1)!) as { level: string; msg: string };
    expect(line).toMatchObject({ level: "error", msg: expect.stringMatching(/^svc: could not start: listen address .* is in use \(Address already in use\)/) });
  });

  it("a second svc on a data_dir in use exits 1 naming the holder, and the running stack is untouched", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "svc-same-dir-"));
    const configPath = path.join(dir, "config.json");
    writeFileSync(configPath, JSON.stringify({ ...config(), listen: "127.0.0.1:0", data_dir: path.join(stack.dir, "data") }));
    const r = await runSvc(["-config", configPath], { env });
    expect(r.code).toBe(1);
    const line = JSON.parse(r.stderr.trim().split("\n").at(-1)!) as { msg: string };
    expect(line.msg).toMatch(new RegExp(`^svc: could not start: data_dir .* is in use by another svc process \\(pid ${stack.child.pid} on `));
    expect((await call(stack.url, "GET", "/health/ready")).status).toBe(200);
  });
});

describe("idle cost", () => {
  it("a running stack keeps no build process: its descendants are workerd and harness processes only", async () => {
    const descendants = processTree(stack.child.pid!).slice(1).map(commandOf).filter(Boolean);
    expect(descendants.some((c) => c.includes("workerd"))).toBe(true);
    expect(descendants.filter((c) => !c.includes("workerd") && !c.includes("reference-harness"))).toEqual([]);
  });
});

describe("HTTP surface", () => {
  it("unknown routes give 404 not_found in the error shape", async () => {
    expectApiError(await call(stack.url, "GET", "/nope"), 404, "not_found");
    expectApiError(await call(stack.url, "GET", "/nope", { token: env.ACME_MANAGE }), 404, "not_found");
  });

  it("X-Request-ID is generated by the service, not taken from the client", async () => {
    const r = await call(stack.url, "GET", "/health/live", { headers: { "X-Request-ID": "f".repeat(32) } });
    expect(r.headers.get("x-request-id")).not.toBe("f".repeat(32));
    const a = await call(stack.url, "GET", "/health/live");
    expect(a.headers.get("x-request-id")).not.toBe(r.headers.get("x-request-id"));
  });

  it("malformed JSON, unknown fields, trailing data and non-objects give 400 invalid_request", async () => {
    for (const raw of ['{"harness":', '{"harness":"pi","config":{"model":"openai/x","tools":[]}} {}', "[]", '"x"', "", "{} x"]) {
      const r = await call(stack.url, "POST", "/sessions", { token: env.ACME_MANAGE, raw, headers: { "Content-Type": "application/json" } });
      expectApiError(r, 400, "invalid_request");
    }
    const unknownTop = await create(stack, env.ACME_MANAGE, { ...basic, extra: 1 });
    expectApiError(unknownTop, 400, "invalid_request");
    expect(unknownTop.body.error.message).toContain("extra");
    const unknownNested = await create(stack, env.ACME_MANAGE, { ...basic, config: { ...basic.config, temperature: 1 } });
    expectApiError(unknownNested, 400, "invalid_request");
    expect(unknownNested.body.error.message).toContain("config.temperature");
  });

  it("a body over input_bytes + 16 KiB gives 413, also when chunked without a length", async () => {
    const cap = 1024 + 16384;
    const atCap = JSON.stringify({ ...basic, config: { ...basic.config, instructions: "" } });
    const padded = atCap.replace('"instructions":""', `"instructions":""${" ".repeat(cap - atCap.length)}`);
    expect(Buffer.byteLength(padded)).toBe(cap);
    const ok = await call(stack.url, "POST", "/sessions", { token: env.ACME_MANAGE, raw: padded, headers: { "Content-Type": "application/json" } });
    expect(ok.status).toBe(201);
    const over = await call(stack.url, "POST", "/sessions", { token: env.ACME_MANAGE, raw: `${padded} `, headers: { "Content-Type": "application/json" } });
    expectApiError(over, 413, "invalid_request");

    const chunks = [new TextEncoder().encode(`${padded.slice(0, 10000)}`), new TextEncoder().encode(`${padded.slice(10000)}  `)];
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        const next = chunks.shift();
        if (next) c.enqueue(next);
        else c.close();
      },
    });
    const chunked = await call(stack.url, "POST", "/sessions", { token: env.ACME_MANAGE, raw: stream, headers: { "Content-Type": "application/json" } });
    expectApiError(chunked, 413, "invalid_request");
  });

  it("an answer that does not use the body (413 over the cap, 401, 404 for no such route) comes once the body is read, on a connection that stays open", async () => {
    const cap = 1024 + 16384;
    const conn = await rawConnection(stack.url);
    const post = (token: string, length: number) =>
      `POST /sessions HTTP/1.1\r\nHost: svc\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
    try {
      for (const [token, status] of [[env.ACME_MANAGE, 413], ["not-a-configured-token-0123456789", 401]] as const) {
        conn.write(post(token, cap + 1000));
        conn.write(" ".repeat(cap));
        conn.write(" ".repeat(1000));
        expect((await conn.response()).status).toBe(status);
      }
      // A chunked body to a route that does not exist (its 404 is thrown past the middleware).
      conn.write("PATCH /no-such-route HTTP/1.1\r\nHost: svc\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
      conn.write("7\r\n{\"a\":1}\r\n");
      conn.write("0\r\n\r\n");
      expect(await conn.response()).toMatchObject({ status: 404 });
      // Had either answer left body bytes unread, the connection would be closed (or they would be
      // read as the next request).
      conn.write("GET /health/live HTTP/1.1\r\nHost: svc\r\n\r\n");
      expect(await conn.response()).toMatchObject({ status: 200, body: '{"status":"ok"}' });
      // A body declared larger than the service ever reads to drop: answered at once, then closed.
      conn.write(post(env.ACME_MANAGE, 5 * 1024 * 1024));
      expect((await conn.response()).status).toBe(413);
      await conn.ended();
    } finally {
      conn.close();
    }
  });
});

describe("a body that stops mid-way", () => {
  it("is answered 15 s after its last byte (400 'request body stalled'), and so is a refusal waiting to drop it (401)", async () => {
    const [mine, stranger] = [await rawConnection(stack.url), await rawConnection(stack.url)];
    const post = (token: string) =>
      `POST /sessions HTTP/1.1\r\nHost: svc\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"harness":`;
    try {
      const started = performance.now();
      mine.write(post(env.ACME_MANAGE));
      stranger.write(post("not-a-configured-token-0123456789"));
      const [a, b] = await Promise.all([mine.response(25_000), stranger.response(25_000)]);
      expect(a.status).toBe(400);
      expect(JSON.parse(a.body).error.message).toBe("request body stalled: no bytes for 15 s");
      expect(b.status).toBe(401);
      expect(performance.now() - started).toBeGreaterThanOrEqual(14_000);
    } finally {
      mine.close();
      stranger.close();
    }
  }, 40_000);
});

/** One raw HTTP/1.1 connection: bytes written as given, answers read one at a time (Content-Length bodies). */
async function rawConnection(url: string) {
  const u = new URL(url);
  const socket = net.connect(Number(u.port), u.hostname);
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  let buf = "";
  let ended = false;
  const wakers = new Set<() => void>();
  const wake = () => wakers.forEach((w) => w());
  socket.setEncoding("latin1");
  socket.on("data", (d: string) => ((buf += d), wake()));
  socket.on("end", () => ((ended = true), wake()));
  socket.on("error", () => ((ended = true), wake()));
  const until = <T>(take: () => T | undefined, what: string, ms = 15_000) =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => (wakers.delete(check), reject(new Error(`timed out waiting for ${what}; got: ${buf.slice(0, 300)}`))), ms);
      const check = () => {
        const v = take();
        if (v !== undefined) (wakers.delete(check), clearTimeout(timer), resolve(v));
        else if (ended && what !== "the end") (wakers.delete(check), clearTimeout(timer), reject(new Error(`connection ended waiting for ${what}`)));
      };
      wakers.add(check);
      check();
    });
  return {
    write: (text: string) => void socket.write(text, "latin1"),
    response: (ms?: number) =>
      until(() => {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return undefined;
        const head = buf.slice(0, end);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < end + 4 + length) return undefined;
        const body = buf.slice(end + 4, end + 4 + length);
        buf = buf.slice(end + 4 + length);
        return { status: Number(head.slice(9, 12)), body };
      }, "a response", ms),
    ended: () => until(() => (ended ? true : undefined), "the end"),
    close: () => socket.destroy(),
  };
}

describe("authentication", () => {
  it("a missing or unrecognized token gives 401 forbidden with WWW-Authenticate: Bearer", async () => {
    expectApiError(await call(stack.url, "GET", "/sessions"), 401, "forbidden");
    expectApiError(await call(stack.url, "GET", "/sessions", { token: secret("nobody") }), 401, "forbidden");
    expectApiError(await call(stack.url, "GET", "/catalog", { headers: { Authorization: `Basic ${env.ACME_MANAGE}` } }), 401, "forbidden");
    expectApiError(await call(stack.url, "POST", "/sessions", { body: basic }), 401, "forbidden");
  });

  it("a read_only token may only GET: writes give 403 forbidden", async () => {
    const s = (await create(stack, env.ACME_MANAGE, basic)).body;
    expect((await call(stack.url, "GET", "/sessions", { token: env.ACME_READ })).status).toBe(200);
    expect((await call(stack.url, "GET", `/sessions/${s.id}`, { token: env.ACME_READ })).status).toBe(200);
    expect((await call(stack.url, "GET", "/catalog", { token: env.ACME_READ })).status).toBe(200);
    expectApiError(await create(stack, env.ACME_READ, basic), 403, "forbidden");
    expectApiError(await call(stack.url, "POST", `/sessions/${s.id}/close`, { token: env.ACME_READ }), 403, "forbidden");
    // read_only wins over manage.
    expectApiError(await create(stack, env.ACME_BOTH, basic), 403, "forbidden");
    expectApiError(await call(stack.url, "POST", `/sessions/${s.id}/close`, { token: env.ACME_BOTH }), 403, "forbidden");
  });

  it("a token without manage gives 403 on create and close", async () => {
    const s = (await create(stack, env.ACME_MANAGE, basic)).body;
    expectApiError(await create(stack, env.ACME_WRITE, basic), 403, "forbidden");
    expectApiError(await call(stack.url, "POST", `/sessions/${s.id}/close`, { token: env.ACME_WRITE }), 403, "forbidden");
    expect((await call(stack.url, "GET", `/sessions/${s.id}`, { token: env.ACME_WRITE })).status).toBe(200);
  });

  it("a session of another tenant looks like an unknown session: 404 not_found", async () => {
    const s = (await create(stack, env.ACME_MANAGE, basic)).body;
    expectApiError(await call(stack.url, "GET", `/sessions/${s.id}`, { token: env.GLOBEX_MANAGE }), 404, "not_found");
    expectApiError(await call(stack.url, "POST", `/sessions/${s.id}/close`, { token: env.GLOBEX_MANAGE }), 404, "not_found");
    expectApiError(await call(stack.url, "GET", `/sessions/${"0".repeat(32)}`, { token: env.ACME_MANAGE }), 404, "not_found");
    // The same answer as for an id that exists nowhere.
    const other = await call(stack.url, "GET", `/sessions/${s.id}`, { token: env.GLOBEX_MANAGE });
    const none = await call(stack.url, "GET", `/sessions/${"0".repeat(32)}`, { token: env.GLOBEX_MANAGE });
    expect(other.body.error).toEqual(none.body.error);
    expect((await call(stack.url, "GET", `/sessions/${s.id}`, { token: env.ACME_MANAGE })).status).toBe(200);
  });

  it("a path id that is not 32 hex names no session: 404", async () => {
    expectApiError(await call(stack.url, "GET", "/sessions/xyz", { token: env.ACME_MANAGE }), 404, "not_found");
    expectApiError(await call(stack.url, "GET", `/sessions/${"g".repeat(32)}`, { token: env.ACME_MANAGE }), 404, "not_found");
  });
});

// "rule N" in the names below: the creation rules in the order they are checked. Rule 1 is the
// token (docs/api.md "Authentication" 3 and 5); rules 2 to 7 are those of docs/api.md "Sessions",
// in the order listed there.
describe("create a session", () => {
  it("records metadata only, status idle, created_at == updated_at, 201", async () => {
    const r = await create(stack, env.ACME_MANAGE, {
      harness: "pi",
      config: { model: "openai/gpt-4o-mini", tools: ["lookup", "shared_tool"], instructions: "Be brief.", reasoning_effort: "off" },
    });
    expect(r.status).toBe(201);
    expectStandardHeaders(r);
    const s = r.body;
    expect(s.id).toMatch(/^[0-9a-f]{32}$/);
    expect(s.status).toBe("idle");
    expect(s.harness).toBe("pi");
    expect(s.created_at).toBe(s.updated_at);
    expect(new Date(s.created_at).toISOString()).toBe(s.created_at);
    expect(s.config).toEqual({ model: "openai/gpt-4o-mini", tools: ["lookup", "shared_tool"], instructions: "Be brief.", reasoning_effort: "off" });
    expect(s.descriptors).toEqual([
      { name: "lookup", description: "Look a thing up", input_schema: { type: "object" } },
      {
        name: "shared_tool",
        description: "Both tenants",
        input_schema: { type: "object", properties: { q: { type: "string" } } },
        output_schema: { type: "object" },
      },
    ]);
    expect(JSON.stringify(s)).not.toContain("127.0.0.1:9");
    expect(s.checkpoint).toBeUndefined();
    expect(s.credential_bindings).toBeUndefined();
    expect((await call(stack.url, "GET", `/sessions/${s.id}`, { token: env.ACME_MANAGE })).body).toEqual(s);
    // No harness starts until the first message.
    expect(stack.stderr()).not.toMatch(/harness (process )?started/);
  });

  it("a session-scoped... manage token that is tenant-wide is required (rule 1)", async () => {
    expectApiError(await create(stack, env.ACME_WRITE, basic), 403, "forbidden");
  });

  it("an unconfigured harness gives 422 unsupported (rule 2)", async () => {
    expectApiError(await create(stack, env.ACME_MANAGE, { ...basic, harness: "nope" }), 422, "unsupported");
  });

  it("config.model must be provider/model with a configured prefix (rule 3)", async () => {
    for (const model of ["gpt-4o-mini", "anthropic/claude-sonnet-4-5", "/gpt", "openai/", ""]) {
      expectApiError(await create(stack, env.ACME_MANAGE, { ...basic, config: { model, tools: [] } }), 400, "invalid_request");
    }
    // Split on the first slash: the rest may contain slashes.
    expect((await create(stack, env.ACME_MANAGE, { ...basic, config: { model: "openai/org/model", tools: [] } })).status).toBe(201);
    expect((await create(stack, env.ACME_MANAGE, { ...basic, config: { model: `openai/${"m".repeat(249)}`, tools: [] } })).status).toBe(201);
    expectApiError(await create(stack, env.ACME_MANAGE, { ...basic, config: { model: `openai/${"m".repeat(250)}`, tools: [] } }), 400, "invalid_request");
  });

  it("reasoning_effort outside the allowed set gives 400 (rule 4)", async () => {
    for (const e of ["off", "minimal", "low", "medium", "high", "xhigh", "max", ""]) {
      expect((await create(stack, env.ACME_MANAGE, { ...basic, config: { ...basic.config, reasoning_effort: e } })).status).toBe(201);
    }
    for (const e of ["HIGH", "extreme", 3, null]) {
      expectApiError(await create(stack, env.ACME_MANAGE, { ...basic, config: { ...basic.config, reasoning_effort: e } }), 400, "invalid_request");
    }
  });

  it("instructions longer than input_bytes (UTF-8 bytes) give 400 (rule 5)", async () => {
    const at = "é".repeat(512); // 1024 bytes
    expect((await create(stack, env.ACME_MANAGE, { ...basic, config: { ...basic.config, instructions: at } })).status).toBe(201);
    expectApiError(await create(stack, env.ACME_MANAGE, { ...basic, config: { ...basic.config, instructions: `${at}a` } }), 400, "invalid_request");
  });

  it("tools not authorized for the tenant give 403 forbidden (rule 6)", async () => {
    expectApiError(await create(stack, env.ACME_MANAGE, { ...basic, config: { ...basic.config, tools: ["globex_only"] } }), 403, "forbidden");
    expectApiError(await create(stack, env.ACME_MANAGE, { ...basic, config: { ...basic.config, tools: ["no_such_tool"] } }), 403, "forbidden");
    expectApiError(await create(stack, env.GLOBEX_MANAGE, { ...basic, config: { ...basic.config, tools: ["lookup"] } }), 403, "forbidden");
    expect((await create(stack, env.GLOBEX_MANAGE, { ...basic, config: { ...basic.config, tools: ["shared_tool", "globex_only"] } })).status).toBe(201);
  });

  it("credential overrides without credential_keys are rejected with 422 unsupported (rule 7)", async () => {
    const r = await create(stack, env.ACME_MANAGE, {
      ...basic,
      config: { ...basic.config, bindings: [{ alias: "crm", provider: "shared_tool" }] },
      credentials: [{ binding: "crm", value: "tok" }],
    });
    expectApiError(r, 422, "unsupported");
  });

  it("a missing required field gives 400", async () => {
    expectApiError(await create(stack, env.ACME_MANAGE, { harness: "pi" }), 400, "invalid_request");
    expectApiError(await create(stack, env.ACME_MANAGE, { harness: "pi", config: { model: "openai/x" } }), 400, "invalid_request");
  });
});

describe("catalog", () => {
  it("lists the tenant's tools without urls or credentials", async () => {
    const r = await call(stack.url, "GET", "/catalog", { token: env.ACME_READ });
    expect(r.status).toBe(200);
    expect(r.body.tools.map((t: { name: string }) => t.name)).toEqual(["lookup", "shared_tool"]);
    for (const t of r.body.tools) expect(Object.keys(t).sort()).toEqual(Object.keys(t).includes("output_schema") ? ["description", "input_schema", "name", "output_schema"] : ["description", "input_schema", "name"]);
    expect(JSON.stringify(r.body)).not.toMatch(/127\.0\.0\.1|OPENAI_KEY/);
    const g = await call(stack.url, "GET", "/catalog", { token: env.GLOBEX_MANAGE });
    expect(g.body.tools.map((t: { name: string }) => t.name)).toEqual(["shared_tool", "globex_only"]);
  });
});

describe("list sessions", () => {
  it("returns the tenant's sessions only, in ascending id order, paged with after + limit", async () => {
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await create(stack, env.GLOBEX_MANAGE, basic)).body.id);
    const all = await call(stack.url, "GET", "/sessions?limit=1000", { token: env.GLOBEX_MANAGE });
    expect(all.status).toBe(200);
    const ids = all.body.sessions.map((s: { id: string }) => s.id);
    expect(ids).toEqual([...ids].sort());
    for (const id of made) expect(ids).toContain(id);
    const acme = await call(stack.url, "GET", "/sessions?limit=1000", { token: env.ACME_MANAGE });
    for (const id of made) expect(acme.body.sessions.map((s: { id: string }) => s.id)).not.toContain(id);

    const seen: string[] = [];
    let after = "";
    for (;;) {
      const page = await call(stack.url, "GET", `/sessions?limit=2&after=${after}`, { token: env.GLOBEX_MANAGE });
      expect(page.body.sessions.length).toBeLessThanOrEqual(2);
      if (page.body.sessions.length === 0) break;
      seen.push(...page.body.sessions.map((s: { id: string }) => s.id));
      after = seen.at(-1)!;
    }
    expect(seen).toEqual(ids);
    // `after` is an id, so either case pages alike.
    const upper = await call(stack.url, "GET", `/sessions?limit=1000&after=${ids[1].toUpperCase()}`, { token: env.GLOBEX_MANAGE });
    expect(upper.body.sessions.map((s: { id: string }) => s.id)).toEqual(ids.slice(2));
  });

  it("limit outside 1..1000 gives 400 invalid_request", async () => {
    expect((await call(stack.url, "GET", "/sessions?limit=1", { token: env.ACME_READ })).status).toBe(200);
    expect((await call(stack.url, "GET", "/sessions?limit=1000", { token: env.ACME_READ })).status).toBe(200);
    for (const l of ["0", "1001", "-1", "abc", "1.5", ""]) {
      expectApiError(await call(stack.url, "GET", `/sessions?limit=${l}`, { token: env.ACME_READ }), 400, "invalid_request");
    }
  });

  it("the default page is 100", async () => {
    for (let i = 0; i < 101; i += 1) await create(stack, env.ACME_MANAGE, basic);
    const r = await call(stack.url, "GET", "/sessions", { token: env.ACME_READ });
    expect(r.body.sessions).toHaveLength(100);
  });
});

describe("close", () => {
  it("returns 202 with status closed, records a retained session.status event, and is idempotent", async () => {
    const s = (await create(stack, env.ACME_MANAGE, basic)).body;
    const r = await call(stack.url, "POST", `/sessions/${s.id}/close`, { token: env.ACME_MANAGE });
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ status: "closed" });
    const again = await call(stack.url, "POST", `/sessions/${s.id}/close`, { token: env.ACME_MANAGE, body: {} });
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ status: "closed" });
    const got = (await call(stack.url, "GET", `/sessions/${s.id}`, { token: env.ACME_READ })).body;
    expect(got.status).toBe("closed");
    expect(got.updated_at >= got.created_at).toBe(true);
    const listed = (await call(stack.url, "GET", `/sessions?limit=1000`, { token: env.ACME_READ })).body.sessions.find((x: { id: string }) => x.id === s.id);
    expect(listed.status).toBe("closed");
    const events = await call(stack.url, "GET", `/sessions/${s.id}/events`, { token: env.ACME_READ });
    expect(events.status).toBe(200);
    expect(events.body.events.map((e: { type: string; data: unknown }) => [e.type, e.data])).toEqual([["session.status", { status: "closed" }]]);
    expect(events.body.events[0].input_id).toBeUndefined();
    expect(typeof events.body.events[0].cursor).toBe("string");
  });

  it("close with unknown fields gives 400", async () => {
    const s = (await create(stack, env.ACME_MANAGE, basic)).body;
    expectApiError(await call(stack.url, "POST", `/sessions/${s.id}/close`, { token: env.ACME_MANAGE, body: { now: true } }), 400, "invalid_request");
  });
});

describe("flush, sync and restore without persistence", () => {
  it("give 422 unsupported after authentication, authorization and the session check", async () => {
    const s = (await create(stack, env.ACME_MANAGE, basic)).body;
    expectApiError(await call(stack.url, "POST", `/sessions/${s.id}/flush`, { token: env.ACME_MANAGE }), 422, "unsupported");
    expectApiError(await call(stack.url, "GET", `/sessions/${s.id}/sync`, { token: env.ACME_READ }), 422, "unsupported");
    expectApiError(await call(stack.url, "POST", `/sessions/${s.id}/restore`, { token: env.ACME_MANAGE, body: { checkpoint: "0".repeat(32) } }), 422, "unsupported");
    expectApiError(await call(stack.url, "POST", `/sessions/${s.id}/restore`, { token: env.ACME_MANAGE, body: {} }), 400, "invalid_request");
    // A malformed checkpoint reference is a bad body too, with or without persistence.
    expectApiError(await call(stack.url, "POST", `/sessions/${s.id}/restore`, { token: env.ACME_MANAGE, body: { checkpoint: "bad" } }), 400, "invalid_request");
    expectApiError(await call(stack.url, "POST", `/sessions/${s.id}/flush`, { token: env.ACME_WRITE }), 403, "forbidden");
    expectApiError(await call(stack.url, "POST", `/sessions/${s.id}/flush`), 401, "forbidden");
    expectApiError(await call(stack.url, "GET", `/sessions/${s.id}/sync`, { token: env.GLOBEX_MANAGE }), 404, "not_found");
  });
});

describe("restart persistence and session-scoped tokens", () => {
  it("sessions survive a restart; a session-scoped token reaches only its session and cannot create", async () => {
    const a = (await create(stack, env.ACME_MANAGE, basic)).body;
    const b = (await create(stack, env.ACME_MANAGE, basic)).body;
    await call(stack.url, "POST", `/sessions/${b.id}/close`, { token: env.ACME_MANAGE });
    const dir = stack.dir;
    const stopped = await stack.stop();
    expect(stopped.code).toBe(0);

    const scoped = secret("acme-scoped");
    stack = await startStack({
      dir,
      config: config([{ token_env: "ACME_SCOPED", tenant: "acme", session: a.id.toUpperCase(), manage: true }]),
      env: { ...env, ACME_SCOPED: scoped },
    });
    const gotA = await call(stack.url, "GET", `/sessions/${a.id}`, { token: env.ACME_READ });
    expect(gotA.body).toEqual(a);
    expect((await call(stack.url, "GET", `/sessions/${b.id}`, { token: env.ACME_READ })).body.status).toBe("closed");

    expect((await call(stack.url, "GET", `/sessions/${a.id}`, { token: scoped })).status).toBe(200);
    expectApiError(await call(stack.url, "GET", `/sessions/${b.id}`, { token: scoped }), 403, "forbidden");
    expectApiError(await create(stack, scoped, basic), 403, "forbidden");
    const list = await call(stack.url, "GET", "/sessions", { token: scoped });
    expect(list.body.sessions.map((s: { id: string }) => s.id)).toEqual([a.id]);
    expect((await call(stack.url, "POST", `/sessions/${a.id}/close`, { token: scoped })).status).toBe(202);
  });
});
