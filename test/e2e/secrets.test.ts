/**
 * Secrets never leak (docs/design-notes.md "Secrets", docs/api.md "Credential overrides"): a distinct secret is
 * planted in every place one can live — access tokens (manage, read-only, session-scoped), the
 * provider key, a tool's bearer token, private credential overrides (a bearer and a header value),
 * the credential key and the runner secret. After a run through every path, errors included (a
 * provider whose error quotes the key, tools whose results quote the credentials they were called
 * with), none of them appears in any log line, response (headers and bodies), event, SSE frame, or
 * any file the stack wrote (the objects' SQLite databases and everything else under its directory).
 */
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call, type Reply } from "../helpers/api.ts";
import { openSse } from "../helpers/sse.ts";
import { startStack, type Stack, REFERENCE_HARNESSES, scriptedProviders } from "../helpers/stack.ts";

const planted = (label: string) => `${label}-${randomBytes(12).toString("hex")}`;
const SECRETS = {
  MANAGE: planted("sec-manage"),
  READ: planted("sec-read"),
  SCOPED: planted("sec-scoped"),
  OPENAI_KEY: planted("sk-sec-provider"),
  TOOL_TOKEN: planted("sec-tool-token"),
  RUNNER_SECRET: planted("sec-runner"),
  CRED_KEY: randomBytes(32).toString("base64"),
};
const OVERRIDE_BEARER = planted("sec-override-bearer");
const OVERRIDE_HEADER = planted("sec-override-header");
const ALL = [...Object.values(SECRETS), OVERRIDE_BEARER, OVERRIDE_HEADER];

let provider: ScriptedProvider;
let tool: http.Server;
let stack: Stack;
const seen: string[] = [];
const toolAuth: string[] = [];

function keep(r: Reply): Reply {
  seen.push(`${r.status} ${JSON.stringify([...r.headers])} ${r.text}`);
  return r;
}
const req = (method: string, p: string, o: Parameters<typeof call>[3] = {}) => call(stack.url, method, p, o).then(keep);

beforeAll(async () => {
  provider = await startScriptedProvider();
  tool = http.createServer((q, res) => {
    toolAuth.push(String(q.headers.authorization ?? ""));
    q.resume().on("end", () => {
      if (q.url === "/fail") return void res.writeHead(500).end("tool broke");
      // A tool that echoes how it was called (a debug endpoint): its result quotes the credentials.
      const saw = { authorization: q.headers.authorization ?? "", api_key: q.headers["x-api-key"] ?? "" };
      res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ content: [{ type: "text", text: `ok, saw ${JSON.stringify(saw)}` }], structured_content: saw }));
    });
  });
  await new Promise<void>((r) => tool.listen(0, "127.0.0.1", r));
  const toolUrl = `http://127.0.0.1:${(tool.address() as AddressInfo).port}`;
  const hostTool = (name: string, p: string) => ({ name, description: name, input_schema: { type: "object" }, url: `${toolUrl}${p}`, tenants: ["t"], token_env: "TOOL_TOKEN" });
  stack = await startStack({
    config: {
      tokens: [
        { token_env: "MANAGE", tenant: "t", manage: true },
        { token_env: "READ", tenant: "t", read_only: true },
        { token_env: "SCOPED", tenant: "t", session: "f".repeat(32) },
      ],
      harnesses: REFERENCE_HARNESSES,
      providers: scriptedProviders(provider.url),
      tools: [hostTool("weather", "/ok"), hostTool("weather2", "/ok"), hostTool("broken", "/fail")],
      credential_keys: { active: "k1", keys: { k1: "CRED_KEY" } },
      runners: { token_env: "RUNNER_SECRET" },
      limits: { input_bytes: 1024, queue: 1 },
    },
    env: SECRETS,
  });
});
afterAll(async () => {
  await stack?.stop();
  await provider?.close();
  tool?.close();
});

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });
}

describe("secrets", () => {
  it("no planted secret reaches a log, a response, an event, a frame or a stored file, on success and error paths", async () => {
    const { MANAGE, READ, SCOPED } = SECRETS;
    // Create with overrides for both bindings (a bearer string and a header map).
    const created = await req("POST", "/sessions", {
      token: MANAGE,
      body: {
        harness: "pi",
        config: { model: "openai/gpt-4o-mini", tools: ["broken"], bindings: [{ alias: "w", provider: "weather" }, { alias: "h", provider: "weather2" }] },
        credentials: [
          { binding: "w", value: OVERRIDE_BEARER },
          { binding: "h", value: { headers: { "X-Api-Key": OVERRIDE_HEADER } } },
        ],
      },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect(created.body.credential_bindings.sort()).toEqual(["h", "w"]);
    const sse = await openSse(`${stack.url}/sessions/${id}/events`, { token: READ });

    // A turn with a working and a failing tool call, then a provider failure and a resume.
    const m1 = await req("POST", `/sessions/${id}/events`, { token: MANAGE, body: { type: "user.message", text: `[[tool weather {"a":1}]] [[tool weather2 {}]] [[tool broken {}]]` } });
    await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === m1.body.id, 30_000);
    // The provider quotes the key in its error, which the harness keeps in its native records too.
    await req("POST", `/sessions/${id}/events`, { token: MANAGE, body: { type: "user.message", text: "[[error 401 bad key {key}]]" } });
    await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "interrupted", 30_000);
    await req("POST", `/sessions/${id}/resume`, { token: MANAGE });
    // A slow turn, a second message queued, a third refused (queue 1), then an interrupt.
    const slow = await req("POST", `/sessions/${id}/events`, { token: MANAGE, body: { type: "user.message", text: "[[deltas 200 size=2]] [[delay 20]]" } });
    // Running, not still waiting for the resumed session's harness to open it: only then is the next one "queued".
    await sse.waitFor((f) => f.event === "assistant.delta" && f.json.input_id === slow.body.id, 30_000);
    expect((await req("POST", `/sessions/${id}/events`, { token: MANAGE, body: { type: "user.message", text: "queued" } })).status).toBe(202);
    expect((await req("POST", `/sessions/${id}/events`, { token: MANAGE, body: { type: "user.message", text: "refused" } })).status).toBe(429);
    await req("POST", `/sessions/${id}/events`, { token: MANAGE, body: { type: "user.interrupt" } });
    await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "interrupted" && f.id !== undefined && f.json.cursor !== m1.body.cursor, 30_000);

    // Errors of every kind, some carrying secrets where they do not belong.
    const errors = [
      await req("GET", "/sessions", { token: `${MANAGE}x` }),
      await req("GET", "/sessions", { headers: { Authorization: `Basic ${SECRETS.OPENAI_KEY}` } }),
      await req("POST", `/sessions/${id}/events`, { token: READ, body: { type: "user.message", text: "ro" } }),
      await req("GET", `/sessions/${id}`, { token: SCOPED }),
      await req("POST", "/sessions", { token: SCOPED, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } }),
      await req("GET", `/sessions/${"0".repeat(32)}`, { token: MANAGE }),
      await req("POST", "/sessions", { token: MANAGE, body: { harness: "pi", config: { model: "openai/x", tools: [] }, extra: 1 } }),
      await req("POST", "/sessions", { token: MANAGE, raw: `{"harness":"pi"} trailing` }),
      await req("POST", "/sessions", { token: MANAGE, body: { harness: "nope", config: { model: "openai/x", tools: [] } } }),
      await req("POST", `/sessions/${id}/events`, { token: MANAGE, body: { type: "user.message", text: "x".repeat(20_000) } }),
      await req("GET", `/sessions/${id}/events?after=${SECRETS.CRED_KEY}`, { token: MANAGE }),
      await req("GET", `/internal/runners/control`, { token: MANAGE }),
      await req("POST", "/sessions", { token: MANAGE, body: { harness: "pi", config: { model: "openai/x", tools: [] }, credentials: [{ binding: "nope", value: OVERRIDE_BEARER }] } }),
    ];
    expect(errors.map((e) => e.status)).toEqual([401, 401, 403, 403, 403, 404, 400, 400, 422, 413, 409, 401, 400]);

    // Reads, the catalog, the contract, health; then close.
    await req("GET", `/sessions/${id}`, { token: READ });
    await req("GET", "/sessions", { token: READ });
    await req("GET", "/catalog", { token: READ });
    await req("GET", "/openapi.json");
    await req("GET", "/health/ready");
    await req("POST", `/sessions/${id}/close`, { token: MANAGE });
    await sse.ended;
    const events = await req("GET", `/sessions/${id}/events?limit=1000`, { token: READ });
    expect(events.body.events.some((e: any) => e.type === "tool.result" && e.data.result.is_error)).toBe(true);
    expect(toolAuth.length).toBeGreaterThanOrEqual(2); // the tools were called (with their token)
    await stack.stop();

    const haystacks: [string, string][] = [
      ["logs", stack.stderr()],
      ["responses", seen.join("\n")],
      ["sse frames", sse.frames.map((f) => `${f.id}\n${f.data}`).join("\n")],
      ...filesUnder(stack.dir).map((f): [string, string] => [path.relative(stack.dir, f), readFileSync(f).toString("latin1")]),
    ];
    expect(haystacks.some(([w]) => w.endsWith(".sqlite"))).toBe(true);
    const leaks = haystacks.flatMap(([where, text]) =>
      ALL.filter((s) => text.includes(s)).map((s) => `${s.split("-").slice(0, 2).join("-")} in ${where}`),
    );
    expect(leaks).toEqual([]);
  });
});
