/**
 * The Hono app over HTTP: through the Worker's `exports.default.fetch`, and through `app.fetch`
 * with an env override where a test needs another host configuration or a failing binding. The
 * runtime is cached per HOST_CONFIG text, so every override config differs from the pool's text.
 */
import { createExecutionContext, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app.ts";
import type { Env } from "../../src/env.ts";
import type { Event, EventList, Session } from "../../src/shared/api-schema.ts";
import { parseHostConfigText } from "../../src/shared/config-schema.ts";
import { newId } from "../../src/shared/ids.ts";
import { RUNNER_PROTOCOL } from "../../src/shared/runner-protocol.ts";
import { decryptCredential } from "../../src/session/credentials.ts";
import type { EncryptedCredential } from "../../src/session/record.ts";
import { api, BASE, createBody, env, createSession, expectApiError, sendMessage, sessionStub, TENANT, tokens } from "./helpers.ts";

const baseConfig = JSON.parse(env.HOST_CONFIG!) as Record<string, unknown>;

/** base64 of 32 bytes: an AES-256 key for `credential_keys`. */
const AES_KEY = btoa(String.fromCharCode(...Array.from({ length: 32 }, (_, i) => (i * 7 + 3) & 0xff)));

/** The pool's env with another host configuration (and extra variables). */
function envWith(config: Record<string, unknown>, vars: Record<string, unknown> = {}): Env {
  return { ...env, ...vars, HOST_CONFIG: JSON.stringify({ ...baseConfig, ...config }) } as Env;
}

const withCredentialKeys = () =>
  envWith({ credential_keys: { active: "k1", keys: { k1: "CRED_KEY_1" } } }, { CRED_KEY_1: AES_KEY });

function call(e: Env, path: string, init: RequestInit & { token?: string } = {}): Promise<Response> {
  const { token = tokens.manage, ...rest } = init;
  const headers = new Headers(rest.headers);
  headers.set("Authorization", `Bearer ${token}`);
  if (rest.body !== undefined) headers.set("Content-Type", "application/json");
  return Promise.resolve(app.fetch(new Request(`${BASE}${path}`, { ...rest, headers }), e, createExecutionContext()));
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("every response", () => {
  it("carries a service-generated 32-hex X-Request-ID (a client-sent one is ignored) and nosniff", async () => {
    const res = await api("/health/live", { token: "", headers: { "X-Request-ID": "client-chosen" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("X-Request-ID")).toMatch(/^[0-9a-f]{32}$/);
    expect(res.headers.get("X-Content-Type-Options")).toBe("nosniff");
  });

  it("gives 404 not_found for an unknown route", async () => {
    await expectApiError(await api("/nope"), 404, "not_found");
  });

  it("gives 404 not_found for a route's path with a trailing slash (no route has one)", async () => {
    const s = await createSession();
    for (const path of [`/sessions/${s.id}/`, `/sessions/${s.id}/events/`, "/sessions/", "/health/live/", "/openapi.json/", "/catalog/"]) {
      await expectApiError(await api(path), 404, "not_found");
    }
    expect((await api("/sessions")).status).toBe(200);
  });

  it("gives 401 forbidden with WWW-Authenticate: Bearer for a missing or unrecognized token", async () => {
    const missing = await api("/sessions", { token: "" });
    expect(missing.headers.get("WWW-Authenticate")).toBe("Bearer");
    await expectApiError(missing, 401, "forbidden");
    await expectApiError(await api("/sessions", { token: "x".repeat(40) }), 401, "forbidden");
  });
});

describe("Create a session", () => {
  it("returns 201 with the Session for a manage token", async () => {
    const res = await api("/sessions", { method: "POST", body: JSON.stringify(createBody()) });
    expect(res.status).toBe(201);
    const s = (await res.json()) as Session;
    expect(s.id).toMatch(/^[0-9a-f]{32}$/);
    expect(s).toMatchObject({ harness: "pi", status: "idle", config: { model: "openai/gpt-test", tools: [] }, descriptors: [] });
    expect(s.credential_bindings).toBeUndefined();
    const got = await api(`/sessions/${s.id}`, { token: tokens.read });
    expect(await got.json()).toEqual(s);
  });

  it("returns 400 invalid_request when the provider's key variable is empty", async () => {
    const body = createBody({ config: { model: "empty/some-model", tools: [] } });
    const e = await expectApiError(await api("/sessions", { method: "POST", body: JSON.stringify(body) }), 400, "invalid_request");
    expect(e.message).toContain("empty");
  });

  it("returns 400 invalid_request when the provider's key variable is not set at all", async () => {
    const e2 = envWith({ providers: { unset: { api_key_env: "UNSET_API_KEY" } } });
    const body = createBody({ config: { model: "unset/m", tools: [] } });
    await expectApiError(await call(e2, "/sessions", { method: "POST", body: JSON.stringify(body) }), 400, "invalid_request");
  });

  it("returns 400 invalid_request for an unknown provider prefix or a model without a slash", async () => {
    for (const model of ["nobody/m", "gpt-test", "openai/"]) {
      const body = createBody({ config: { model, tools: [] } });
      await expectApiError(await api("/sessions", { method: "POST", body: JSON.stringify(body) }), 400, "invalid_request");
    }
  });

  it("returns 422 unsupported when the harness is not configured", async () => {
    const body = createBody({ harness: "nope" });
    await expectApiError(await api("/sessions", { method: "POST", body: JSON.stringify(body) }), 422, "unsupported");
  });

  it("checks the harness first: an unknown harness is 422 also when the model, the effort or another field breaks a later rule", async () => {
    for (const config of [
      { model: "openai/m", tools: [], reasoning_effort: "bogus" },
      { model: `openai/${"m".repeat(250)}`, tools: [] },
      { model: "gpt-test", tools: [] },
      { model: "openai/m", tools: ["no-such-tool"] },
    ]) {
      const res = await api("/sessions", { method: "POST", body: JSON.stringify(createBody({ harness: "nope", config })) });
      expect((await expectApiError(res, 422, "unsupported")).message).toBe('harness "nope" is not configured');
    }
  });

  it("returns 403 forbidden for a token without manage", async () => {
    await expectApiError(await api("/sessions", { method: "POST", token: tokens.read, body: JSON.stringify(createBody()) }), 403, "forbidden");
  });

  it("returns 400 invalid_request when instructions are longer than limits.input_bytes (UTF-8 bytes)", async () => {
    // 1024 bytes is the limit: 512 two-byte characters fit, one more ASCII byte does not.
    const fits = createBody({ config: { model: "openai/m", tools: [], instructions: "é".repeat(512) } });
    expect((await api("/sessions", { method: "POST", body: JSON.stringify(fits) })).status).toBe(201);
    const over = createBody({ config: { model: "openai/m", tools: [], instructions: `${"é".repeat(512)}x` } });
    await expectApiError(await api("/sessions", { method: "POST", body: JSON.stringify(over) }), 400, "invalid_request");
  });

  it("an unknown session is 404 before its body is judged (malformed, or over the cap)", async () => {
    const unknown = newId();
    const big = JSON.stringify({ type: "user.message", text: "x".repeat(20_000) });
    for (const path of ["events", "close", "resume", "restore", "flush"]) {
      for (const body of ["{bad", big]) {
        await expectApiError(await api(`/sessions/${unknown}/${path}`, { method: "POST", body }), 404, "not_found");
      }
    }
  });

  it("refuses a compressed body, a query parameter given twice, and an unknown reasoning effort by name", async () => {
    const message = async (res: Response) => ((await res.clone().json()) as { error: { message: string } }).error.message;
    const gz = await api("/sessions", { method: "POST", body: JSON.stringify(createBody()), headers: { "Content-Encoding": "gzip" } });
    expect(await message(gz)).toBe("Content-Encoding: gzip: the service takes request bodies uncompressed (identity) only");
    await expectApiError(gz, 400, "invalid_request");
    expect((await api("/sessions", { method: "POST", body: JSON.stringify(createBody()), headers: { "Content-Encoding": "identity" } })).status).toBe(201);
    const { id } = await createSession();
    for (const path of ["/sessions?limit=1&limit=2000", `/sessions/${id}/events?limit=5&limit=5`, `/sessions/${id}/events?after=&after=`]) {
      const res = await api(path);
      expect(await message(res), path).toMatch(/^(limit|after): given more than once$/);
      await expectApiError(res, 400, "invalid_request");
    }
    const effort = await api("/sessions", { method: "POST", body: JSON.stringify(createBody({ config: { model: "openai/m", tools: [], reasoning_effort: "extreme" } })) });
    expect(await message(effort)).toBe("config.reasoning_effort: must be one of off, minimal, low, medium, high, xhigh, max, or empty");
  });

  it("a missing required field is named with \"required\"", async () => {
    for (const [body, text] of [
      ['{"harness":"pi"}', "config: required"],
      ['{"harness":"pi","config":{"model":"openai/m"}}', "config.tools: required"],
    ] as const) {
      const res = await api("/sessions", { method: "POST", body });
      await expectApiError(res.clone(), 400, "invalid_request");
      expect(((await res.json()) as { error: { message: string } }).error.message).toBe(text);
    }
  });

  it("returns 400 invalid_request for unknown fields and trailing data", async () => {
    const unknown = { ...createBody(), extra: 1 };
    await expectApiError(await api("/sessions", { method: "POST", body: JSON.stringify(unknown) }), 400, "invalid_request");
    await expectApiError(await api("/sessions", { method: "POST", body: `${JSON.stringify(createBody())} {}` }), 400, "invalid_request");
  });

  it("returns 400 for what could not be kept as sent, in free-form members too: a number beyond float range, a __proto__ key, a lone surrogate, a repeated member", async () => {
    const body = (parameters: string) =>
      JSON.stringify(createBody({ config: { model: "openai/m", tools: [], bindings: [{ alias: "w" }] } })).replace('"alias":"w"', `"alias":"w","parameters":${parameters}`);
    const cases: [string, string][] = [
      ['{"x":1e400}', "config.bindings[0].parameters.x: number is out of range"],
      ['{"x":[1,-1e999]}', "config.bindings[0].parameters.x[1]: number is out of range"],
      ['{"__proto__":{"city":"x"},"city":"Paris"}', "config.bindings[0].parameters.__proto__: the name __proto__ is not allowed"],
      ['{"a":{"b":{"__proto__":1}}}', "config.bindings[0].parameters.a.b.__proto__: the name __proto__ is not allowed"],
      ['{"x":"a\\ud800b"}', "config.bindings[0].parameters.x: text is not valid Unicode (a lone surrogate)"],
      ['{"\\udc00":1}', 'config.bindings[0].parameters["\\udc00"]: the name is not valid Unicode (a lone surrogate)'],
      ['{"x":[{"k":1},{"k":2,"k":3}]}', "config.bindings[0].parameters.x[1].k: the member is given more than once"],
      ['{"a":1,"\\u0061":2}', "config.bindings[0].parameters.a: the member is given more than once"],
    ];
    for (const [parameters, message] of cases) {
      const res = await api("/sessions", { method: "POST", body: body(parameters) });
      expect(((await res.clone().json()) as { error: { message: string } }).error.message).toBe(message);
      await expectApiError(res, 400, "invalid_request");
    }
    const kept = await api("/sessions", { method: "POST", body: body('{"x":1e300,"y":-0,"z":"__proto__","s":"\\ud83d\\ude00 \\"k\\":1","n":{"z":1},"m":[{"z":2}]}') });
    expect(kept.status).toBe(201);
    expect(((await kept.json()) as Session).config.bindings![0]!.parameters).toEqual({ x: 1e300, y: 0, z: "__proto__", s: '😀 "k":1', n: { z: 1 }, m: [{ z: 2 }] });
    // The same name in the message's envelope: the last would win silently (an interrupt sent as a message).
    const { id } = await createSession();
    const twice = await api(`/sessions/${id}/events`, { method: "POST", body: '{"type":"user.interrupt","type":"user.message","text":"hi"}' });
    expect(((await twice.clone().json()) as { error: { message: string } }).error.message).toBe("type: the member is given more than once");
    await expectApiError(twice, 400, "invalid_request");
  });
});

describe("Request bodies: nesting depth", () => {
  const big = () => envWith({ limits: { ...(baseConfig.limits as object), input_bytes: 65536 } });
  /** `[[[…]]]` nested `n` levels, as raw JSON text. */
  const nested = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;
  /** `{"a":{"a":…{}}}` nested `n` levels: `parameters` must be an object. */
  const nestedObject = (n: number) => `${'{"a":'.repeat(n - 1)}{}${"}".repeat(n - 1)}`;
  /** A create body whose deepest point is exactly `total` levels (the root object is level 1). */
  const withParameters = (total: number) =>
    `{"harness":"pi","config":{"model":"openai/m","tools":[],"bindings":[{"alias":"a","parameters":${nestedObject(total - 4)}}]}}`;
  const withInputSchema = (depth: number) =>
    `{"harness":"pi","config":{"model":"openai/m","tools":[],"bindings":[{"alias":"a","runtime":[{"name":"t","description":"d","input_schema":{"type":"object","x":${nested(depth)}}}]}]}}`;

  it("returns 400 invalid_request, not 500, for 10,000 levels in bindings[].parameters or a runtime tool's input_schema", async () => {
    for (const body of [withParameters(10_000), withInputSchema(10_000)]) {
      const e = await expectApiError(await call(big(), "/sessions", { method: "POST", body }), 400, "invalid_request");
      expect(e.message).toBe("request body nests deeper than 64 levels");
    }
  });

  it("accepts 64 levels and refuses 65, whatever the route", async () => {
    expect((await call(big(), "/sessions", { method: "POST", body: withParameters(64) })).status).toBe(201);
    await expectApiError(await call(big(), "/sessions", { method: "POST", body: withParameters(65) }), 400, "invalid_request");
    const s = await createSession();
    const deepInput = `{"type":"user.message","text":"x","key":${nested(64)}}`;
    const e = await expectApiError(await call(big(), `/sessions/${s.id}/events`, { method: "POST", body: deepInput }), 400, "invalid_request");
    expect(e.message).toMatch(/nests deeper/);
  });

  it("does not count brackets inside strings, escaped quotes included", async () => {
    const text = `\\"${"[{".repeat(200)}`;
    const body = `{"harness":"pi","config":{"model":"openai/m","tools":[],"instructions":"${text}"}}`;
    expect((await call(big(), "/sessions", { method: "POST", body })).status).toBe(201);
  });
});

describe("runner-host dial-in", () => {
  const RUNNER_SECRET = "runner-secret-0123456789abcdef-0123";
  const withRunners = () => envWith({ runners: { token_env: "RUNNER_SECRET" } }, { RUNNER_SECRET });

  it("opens the control socket only with the runner secret: anything else is 401 forbidden", async () => {
    const e2 = withRunners();
    const upgrade = { headers: { Upgrade: "websocket" } };
    for (const token of ["", "wrong-secret-0123456789abcdef-0123", tokens.manage, `${RUNNER_SECRET}x`]) {
      const res = await call(e2, "/internal/runners/control", { ...upgrade, token });
      expect((await expectApiError(res, 401, "forbidden")).message).toBe("runner secret is missing or wrong");
      expect(res.headers.get("WWW-Authenticate")).toBe("Bearer");
    }
    const res = await call(e2, `/internal/runners/control?protocol=${RUNNER_PROTOCOL}&region=default`, { ...upgrade, token: RUNNER_SECRET });
    expect(res.status).toBe(101);
    res.webSocket!.accept();
    res.webSocket!.close(1000, "test done");
  });

  it("an unknown internal route is 404 before the secret is asked; refusals are logged at most once per 10 s, counted", async () => {
    const e2 = withRunners();
    for (const [path, method] of [["/internal/foo", "GET"], ["/internal/", "GET"], ["/internal/status", "POST"], ["/internal/drain", "GET"]] as const) {
      const res = await call(e2, path, { method, token: "" });
      expect(res.status).toBe(404);
      expect(res.headers.get("WWW-Authenticate")).toBeNull();
    }
    const logged = vi.spyOn(console, "log").mockImplementation(() => {});
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const refusals = () => logged.mock.calls.map((c) => JSON.parse(String(c[0]))).filter((l) => l.msg.startsWith("internal request refused"));
      vi.setSystemTime(Date.now() + 3_600_000); // past any earlier test's refusal
      for (let i = 0; i < 5; i++) expect((await call(e2, "/internal/status", { token: "" })).status).toBe(401);
      expect(refusals()).toMatchObject([{ level: "warn", path: "/internal/status", presented: false, refused: expect.any(Number) }]); // with any an earlier test left uncounted
      vi.setSystemTime(Date.now() + 9_999);
      expect((await call(e2, "/internal/status", { token: "wrong-secret-0123456789abcdef-0123" })).status).toBe(401);
      expect(refusals()).toHaveLength(1);
      vi.setSystemTime(Date.now() + 1);
      expect((await call(e2, "/internal/status", { token: "wrong-secret-0123456789abcdef-0123" })).status).toBe(401);
      expect(refusals()[1]).toMatchObject({ presented: true, refused: 6 });
    } finally {
      vi.useRealTimers();
    }
  });

  it("refuses a session link whose object name or lease is malformed", async () => {
    const e2 = withRunners();
    const id = newId();
    for (const query of [`session=${id}&lease=1`, `session=${id}:&lease=1`, `session=${id.toUpperCase()}:${TENANT}&lease=1`, `session=${id}:${TENANT}&lease=0`]) {
      const res = await call(e2, `/internal/runners/link?protocol=${RUNNER_PROTOCOL}&${query}`, { headers: { Upgrade: "websocket" }, token: RUNNER_SECRET });
      expect((await expectApiError(res, 400, "invalid_request")).message).toBe("session and lease are required");
    }
  });
});

describe("Create a session: credential overrides", () => {
  const binding = { alias: "gh" };
  const secretValue = "ghp_credential-value-that-must-never-leak";

  it("stores an override encrypted, lists it in credential_bindings, and returns neither value nor ciphertext", async () => {
    const e2 = withCredentialKeys();
    const body = createBody({
      config: { model: "openai/m", tools: [], bindings: [binding, { alias: "api" }] },
      credentials: [
        { binding: "gh", value: secretValue },
        { binding: "api", value: { headers: { "X-Api-Key": `${secretValue}-header` } } },
      ],
    });
    const res = await call(e2, "/sessions", { method: "POST", body: JSON.stringify(body) });
    const createdText = await res.text();
    expect(res.status, createdText).toBe(201);
    const created = JSON.parse(createdText) as Session;
    expect(created.credential_bindings).toEqual(["gh", "api"]);

    const rows = await runInDurableObject(sessionStub(created.id), (_, state) =>
      state.storage.sql.exec<EncryptedCredential>("SELECT alias, key_id, iv, ciphertext FROM credentials ORDER BY alias").toArray(),
    );
    expect(rows.map((r) => [r.alias, r.key_id])).toEqual([
      ["api", "k1"],
      ["gh", "k1"],
    ]);
    for (const r of rows) expect(r.ciphertext).not.toContain("ghp_");
    // The ciphertext decrypts with the configured key, bound to this tenant, session and alias.
    const parsed = parseHostConfigText(e2.HOST_CONFIG!);
    if (!parsed.ok) throw new Error(parsed.problems.join("; "));
    const vars = { CRED_KEY_1: AES_KEY };
    const gh = rows.find((r) => r.alias === "gh")!;
    expect(await decryptCredential(parsed.config, vars, { tenant: TENANT, sessionId: created.id }, gh)).toBe(secretValue);
    await expect(decryptCredential(parsed.config, vars, { tenant: "other", sessionId: created.id }, gh)).rejects.toThrow(`credential key "${gh.key_id}": its value does not decrypt the override`);
    // Another value under the key's id: the failure names the key (for the operator's log), no more.
    const other = { CRED_KEY_1: btoa(String.fromCharCode(...new Uint8Array(32).fill(7))) };
    await expect(decryptCredential(parsed.config, other, { tenant: TENANT, sessionId: created.id }, gh)).rejects.toThrow(`credential key "${gh.key_id}": its value does not decrypt the override (it changed)`);

    const got = await (await api(`/sessions/${created.id}`)).text();
    const list = await (await api("/sessions?limit=1000")).text();
    for (const text of [createdText, got, list]) {
      expect(text).not.toContain(secretValue);
      for (const r of rows) {
        expect(text).not.toContain(r.ciphertext);
        expect(text).not.toContain(r.iv);
      }
    }
    expect((JSON.parse(got) as Session).credential_bindings).toEqual(["gh", "api"]);
  });

  it("returns 400 invalid_request for an override naming an unknown alias", async () => {
    const body = createBody({
      config: { model: "openai/m", tools: [], bindings: [binding] },
      credentials: [{ binding: "nope", value: secretValue }],
    });
    const e = await expectApiError(await call(withCredentialKeys(), "/sessions", { method: "POST", body: JSON.stringify(body) }), 400, "invalid_request");
    expect(e.message).not.toContain(secretValue);
  });

  it("returns 400 invalid_request for an alias given twice", async () => {
    const body = createBody({
      config: { model: "openai/m", tools: [], bindings: [binding] },
      credentials: [
        { binding: "gh", value: "a" },
        { binding: "gh", value: "b" },
      ],
    });
    await expectApiError(await call(withCredentialKeys(), "/sessions", { method: "POST", body: JSON.stringify(body) }), 400, "invalid_request");
  });

  it("returns 400 invalid_request for a value that is neither a token string nor {headers: {name: string}}", async () => {
    const bad: unknown[] = [
      "",
      42,
      null,
      ["x"],
      { token: "x" },
      { headers: {} },
      { headers: { "bad name": "x" } },
      { headers: { "X-Key": 1 } },
      { headers: { "X-Key": "x" }, extra: true },
      // Not usable as an HTTP header value: refused now, not at the first call that needs it.
      "line\nbreak",
      "nul\u0000",
      "beyond-latin1-\u20ac",
      // Not sent as given: HTTP drops spaces and tabs at the ends; past ASCII goes out as other bytes.
      "SECRETVAL1 ",
      "\tSECRETVAL1",
      "s\u00e9cretval4",
      "ab\u0085",
      { headers: { "X-Api-Key": "  SECRETVAL2  " } },
      { headers: { "X-Api-Key": "caf\u00e9" } },
      { headers: { "X-Key": "a\r\nX-Injected: 1" } },
      // Headers the service or the HTTP client sets itself: such a call could never be sent as given.
      { headers: { "Content-Length": "1" } },
      { headers: { "transfer-encoding": "chunked" } },
      { headers: { Expect: "100-continue" } },
      { headers: { Host: "elsewhere" } },
      { headers: { "Content-Type": "text/plain" } },
      { headers: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" } },
      { headers: { "Mcp-Session-Id": "x" } },
      { headers: { "X-A": "1", "x-a": "2" } },
    ];
    for (const value of bad) {
      const body = createBody({ config: { model: "openai/m", tools: [], bindings: [binding] }, credentials: [{ binding: "gh", value }] });
      const res = await call(withCredentialKeys(), "/sessions", { method: "POST", body: JSON.stringify(body) });
      expect(res.status, `value ${JSON.stringify(value)}`).toBe(400);
      await expectApiError(res, 400, "invalid_request");
    }
  });

  it("returns 422 unsupported for overrides when no credential_keys are configured", async () => {
    const body = createBody({
      config: { model: "openai/m", tools: [], bindings: [binding] },
      credentials: [{ binding: "gh", value: secretValue }],
    });
    await expectApiError(await api("/sessions", { method: "POST", body: JSON.stringify(body) }), 422, "unsupported");
  });
});

describe("500 service_error", () => {
  it("answers an internal failure with the generic body, the request id in X-Request-ID, and logs the cause with that id", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const internal = "sqlite exploded at /var/secret/path token=hunter2";
    const broken = {
      ...env,
      SESSIONS: {
        getByName() {
          throw new Error(internal);
        },
      },
    } as unknown as Env;
    const res = await call(broken, `/sessions/${newId()}`);
    expect(res.status).toBe(500);
    const text = await res.text();
    const requestId = res.headers.get("X-Request-ID");
    expect(requestId).toMatch(/^[0-9a-f]{32}$/);
    expect(text).toBe(JSON.stringify({ error: { code: "service_error", message: "internal server error" }, request_id: requestId }));
    expect(text).not.toContain("sqlite");
    expect(text).not.toContain("hunter2");
    expect(res.headers.get("X-Content-Type-Options")).toBe("nosniff");

    const logged = errors.mock.calls.map((c) => String(c[0])).filter((l) => l.includes(requestId!));
    expect(logged).toHaveLength(1);
    const line = JSON.parse(logged[0]!) as Record<string, unknown>;
    expect(line).toMatchObject({ level: "error", request_id: requestId });
    expect(String(line.error)).toContain("sqlite exploded");
  });

  it("answers an object RPC that rejects with the generic 500 body", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const broken = {
      ...env,
      SESSIONS: { getByName: () => ({ get: () => Promise.reject(new Error("rpc torn down: internal detail")) }) },
    } as unknown as Env;
    const existing = await createSession();
    const res = await call(broken, `/sessions/${existing.id}`);
    const requestId = res.headers.get("X-Request-ID")!;
    expect(await res.json()).toEqual({ error: { code: "service_error", message: "internal server error" }, request_id: requestId });
    expect(errors.mock.calls.some((c) => String(c[0]).includes(requestId))).toBe(true);
  });

  it("answers a typed service_error from an object with the generic message, and logs what it said", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const said = "the stored manifest names another session (bucket svc-prod/tenant-a)";
    const broken = {
      ...env,
      SESSIONS: { getByName: () => ({ get: () => Promise.resolve({ ok: false, error: { code: "service_error", message: said } }) }) },
    } as unknown as Env;
    const existing = await createSession();
    const res = await call(broken, `/sessions/${existing.id}`);
    expect(res.status).toBe(500);
    const requestId = res.headers.get("X-Request-ID")!;
    expect(await res.json()).toEqual({ error: { code: "service_error", message: "internal server error" }, request_id: requestId });
    const logged = errors.mock.calls.map((c) => String(c[0])).filter((l) => l.includes(requestId));
    expect(logged.some((l) => l.includes("names another session"))).toBe(true);
  });
});

describe("Get a session", () => {
  it("returns 404 not_found for an unknown session, another tenant's session, or a malformed id", async () => {
    const s = await createSession();
    await expectApiError(await api(`/sessions/${newId()}`), 404, "not_found");
    await expectApiError(await api(`/sessions/${s.id}`, { token: tokens.other }), 404, "not_found");
    await expectApiError(await api("/sessions/not-an-id"), 404, "not_found");
  });

  it("accepts the id in upper case", async () => {
    const s = await createSession();
    const res = await api(`/sessions/${s.id.toUpperCase()}`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as Session).id).toBe(s.id);
  });
});

describe("Send input", () => {
  it("returns 202 with the recorded user.message Event carrying a cursor", async () => {
    const s = await createSession();
    const res = await api(`/sessions/${s.id}/events`, { method: "POST", body: JSON.stringify({ type: "user.message", text: "hi", key: "k1" }) });
    expect(res.status).toBe(202);
    const e = (await res.json()) as Event;
    expect(e).toMatchObject({ type: "user.message", data: { type: "user.message", text: "hi", delivery: "queue", key: "k1" } });
    expect(e.id).toMatch(/^[0-9a-f]{32}$/);
    expect(e.cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(e.input_id).toBeUndefined();
  });

  it("returns the original event for a repeated key with the same input, and 409 conflict with different input", async () => {
    const s = await createSession();
    const send = (text: string) => api(`/sessions/${s.id}/events`, { method: "POST", body: JSON.stringify({ type: "user.message", text, key: "same" }) });
    const first = (await (await send("a")).json()) as Event;
    const again = await send("a");
    expect(again.status).toBe(202);
    expect(await again.json()).toEqual(first);
    await expectApiError(await send("b"), 409, "conflict");
  });

  it("returns 429 overloaded with Retry-After: 1 when the queue (limits.queue = 3) is full", async () => {
    const s = await createSession();
    for (let i = 0; i < 3; i++) await sendMessage(s.id, `m${i}`);
    const res = await api(`/sessions/${s.id}/events`, { method: "POST", body: JSON.stringify({ type: "user.message", text: "m3" }) });
    expect(res.headers.get("Retry-After")).toBe("1");
    await expectApiError(res, 429, "overloaded");
  });

  it("counts only queued inputs against limits.queue: the running turn's input leaves room for three more", async () => {
    const s = await createSession();
    await sendMessage(s.id, "m0");
    // The first input starts as it would once the session runs (no runner-host here).
    await runInDurableObject(sessionStub(s.id), (_, state) => state.storage.sql.exec("UPDATE inputs SET state = 'running'"));
    for (let i = 1; i <= 3; i++) await sendMessage(s.id, `m${i}`);
    await expectApiError(await api(`/sessions/${s.id}/events`, { method: "POST", body: JSON.stringify({ type: "user.message", text: "m4" }) }), 429, "overloaded");
  });

  it("returns 400 for text over limits.input_bytes and 413 for a body over input_bytes + 16 KiB", async () => {
    const s = await createSession();
    const path = `/sessions/${s.id}/events`;
    expect((await api(path, { method: "POST", body: JSON.stringify({ type: "user.message", text: "x".repeat(1024) }) })).status).toBe(202);
    await expectApiError(await api(path, { method: "POST", body: JSON.stringify({ type: "user.message", text: "x".repeat(1025) }) }), 400, "invalid_request");
    const huge = JSON.stringify({ type: "user.message", text: "x".repeat(1024 + 16384) });
    await expectApiError(await api(path, { method: "POST", body: huge }), 413, "invalid_request");
  });

  it("returns 422 unsupported for delivery steer and 403 forbidden for a read-only token", async () => {
    const s = await createSession();
    const path = `/sessions/${s.id}/events`;
    await expectApiError(await api(path, { method: "POST", body: JSON.stringify({ type: "user.message", text: "x", delivery: "steer" }) }), 422, "unsupported");
    await expectApiError(await api(path, { method: "POST", token: tokens.read, body: JSON.stringify({ type: "user.message", text: "x" }) }), 403, "forbidden");
  });

  it("returns 409 conflict after close, and close is 202 and permanent", async () => {
    const s = await createSession();
    const closed = await api(`/sessions/${s.id}/close`, { method: "POST" });
    expect(closed.status).toBe(202);
    expect(await closed.json()).toEqual({ status: "closed" });
    await expectApiError(await api(`/sessions/${s.id}/events`, { method: "POST", body: JSON.stringify({ type: "user.message", text: "x" }) }), 409, "conflict");
    expect((await api(`/sessions/${s.id}/close`, { method: "POST", body: "{}" })).status).toBe(202);
  });
});

describe("Read events (JSON mode)", () => {
  it("pages retained events with cursors; next_cursor of an empty page is the after that was sent", async () => {
    const s = await createSession();
    const sent = [await sendMessage(s.id, "one"), await sendMessage(s.id, "two")];
    const page1 = (await (await api(`/sessions/${s.id}/events?limit=1`)).json()) as EventList;
    expect(page1.events.map((e) => e.id)).toEqual([sent[0]!.id]);
    expect(page1.next_cursor).toBe(sent[0]!.cursor);
    const page2 = (await (await api(`/sessions/${s.id}/events?after=${page1.next_cursor}`)).json()) as EventList;
    expect(page2.events).toEqual([sent[1]]);
    const empty = (await (await api(`/sessions/${s.id}/events?after=${page2.next_cursor}`)).json()) as EventList;
    expect(empty).toEqual({ events: [], next_cursor: page2.next_cursor });
    const none = (await (await api(`/sessions/${(await createSession()).id}/events`)).json()) as EventList;
    expect(none).toEqual({ events: [], next_cursor: "" });
  });

  it("returns 400 invalid_request for a limit outside 1 to 1000", async () => {
    const s = await createSession();
    for (const limit of ["0", "1001", "-1", "1.5", "abc"]) {
      await expectApiError(await api(`/sessions/${s.id}/events?limit=${limit}`), 400, "invalid_request");
    }
  });

  it("returns 409 cursor_unavailable for an event id, a fabricated string, an oversize cursor, or another session's cursor", async () => {
    const s = await createSession();
    const e = await sendMessage(s.id, "one");
    const other = await createSession();
    const foreign = await sendMessage(other.id, "x");
    const bad = [e.id, "abc", "A".repeat(513), foreign.cursor!, `${e.cursor!}x`];
    for (const after of bad) {
      await expectApiError(await api(`/sessions/${s.id}/events?after=${encodeURIComponent(after)}`), 409, "cursor_unavailable");
    }
  });
});

describe("List sessions", () => {
  it("lists the tenant's sessions in ascending id order, with keyset paging by after", async () => {
    const ids = [(await createSession()).id, (await createSession()).id, (await createSession()).id].sort();
    const all = ((await (await api("/sessions?limit=1000")).json()) as { sessions: Session[] }).sessions.map((x) => x.id);
    expect(all).toEqual([...all].sort());
    for (const id of ids) expect(all).toContain(id);
    const after = ((await (await api(`/sessions?after=${ids[0]}&limit=1000`)).json()) as { sessions: Session[] }).sessions.map((x) => x.id);
    expect(after).not.toContain(ids[0]);
    expect(after).toContain(ids[1]);
    const others = ((await (await api("/sessions", { token: tokens.other })).json()) as { sessions: Session[] }).sessions.map((x) => x.id);
    for (const id of ids) expect(others).not.toContain(id);
  });

  it("answers 400 for an after that is no session id (undecodable, too short, not hex), and takes one in upper case", async () => {
    for (const after of ["%FF", "%E0%A4%A", "zzz", "abc", "0".repeat(31), `${"0".repeat(32)}0`, "g".repeat(32)]) {
      await expectApiError(await api(`/sessions?after=${after}`), 400, "invalid_request");
    }
    const ids = [(await createSession()).id, (await createSession()).id].sort();
    const upper = ((await (await api(`/sessions?after=${ids[0]!.toUpperCase()}&limit=1000`)).json()) as { sessions: Session[] }).sessions.map((x) => x.id);
    expect(upper).not.toContain(ids[0]);
    expect(upper).toContain(ids[1]);
    expect((await api("/sessions?after=")).status).toBe(200);
  });
});
