/**
 * Generated malformed requests for the fuzz run: every route (executor routes included), with
 * bad methods, ids, query strings, headers (auth, content type, Last-Event-ID, content-length lies)
 * and bodies (wrong types, deep nesting, sizes at and over the caps, invalid UTF-8, BOMs,
 * duplicate keys, trailing data). Each request is raw bytes, so nothing a client library would
 * refuse to send is left out.
 */
import fc from "fast-check";

/** What the generator may aim at: real tokens, sessions and cursors of the running stack. */
export type Targets = {
  tokens: string[];
  sessions: string[];
  cursors: string[];
  bodyCap: number;
};

export type RawRequest = { method: string; target: string; headers: [string, string][]; body: Uint8Array; kind: string };

const enc = new TextEncoder();
const hex = (n: number) => fc.stringMatching(new RegExp(`^[0-9a-f]{${n}}$`));

function idArb(t: Targets): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(...t.sessions) },
    fc.constantFrom(...t.sessions).map((s) => s.toUpperCase()),
    hex(32),
    hex(31),
    hex(33),
    fc.constantFrom("", "x".repeat(32), "%41%41", "..", "%2e%2e", "0".repeat(4096), "\u00e9".repeat(32), "%ZZ", "%00", "a%2Fb"),
    fc.string({ maxLength: 40 }).map(encodeURIComponent),
  );
}

function pathArb(t: Targets): fc.Arbitrary<string> {
  const id = idArb(t);
  const sub = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom("", "/events", "/events", "/resume", "/close", "/flush", "/sync", "/restore") },
    { weight: 1, arbitrary: fc.constantFrom("/events/", "/nope", "//events") },
  );
  const execSub = fc.constantFrom("/close", "/commands", "/responses", "/rpc", "", "/x");
  return fc.oneof(
    { weight: 10, arbitrary: fc.tuple(id, sub).map(([i, s]) => `/sessions/${i}${s}`) },
    { weight: 2, arbitrary: fc.constantFrom("/sessions", "/sessions/", "/catalog", "/catalog/", "/executors", "/health/live", "/health/ready", "/health", "/", "//sessions") },
    { weight: 2, arbitrary: fc.tuple(id, execSub).map(([i, s]) => `/executors/${i}${s}`) },
    { weight: 1, arbitrary: fc.constantFrom("/internal/runners/control", "/internal/runners/link", "/internal/runners/link?session=x&lease=1", "/internal/x") },
    { weight: 1, arbitrary: fc.string({ maxLength: 60 }).map((s) => `/${encodeURIComponent(s)}`) },
    { weight: 1, arbitrary: fc.constantFrom("/sessions/../catalog", "/%2e%2e/sessions", `/sessions/${"a".repeat(10_000)}`, "/sessions?x=1#frag") },
  );
}

function queryArb(t: Targets): fc.Arbitrary<string> {
  const after = fc.oneof(
    fc.constantFrom(...t.cursors),
    fc.constantFrom("", "%", "%zz", "x".repeat(513), "A".repeat(512), "null", "undefined", "%00", "%FF%FE"),
    fc.constantFrom(...t.cursors).map((c) => c.slice(0, -2) + "AA"),
    hex(32),
    fc.base64String({ maxLength: 80 }).map(encodeURIComponent),
    fc.string({ maxLength: 30 }).map(encodeURIComponent),
  );
  const limit = fc.oneof(
    fc.integer({ min: -5, max: 1005 }).map(String),
    fc.constantFrom("", "1.5", "1e3", "0x10", "+5", " 5", "99999999999999999999", "NaN", "-0", "١٠"),
  );
  const parts = fc.array(
    fc.oneof(
      after.map((a) => `after=${a}`),
      limit.map((l) => `limit=${l}`),
      fc.constantFrom("after", "limit", "=", "&&", "after=&after=x", "limit=1&limit=2000"),
    ),
    { maxLength: 3 },
  );
  return parts.map((p) => (p.length ? `?${p.join("&")}` : ""));
}

/** A few well-formed bodies to mutate: requests that get past the parser reach deeper code. */
function baseBodies(t: Targets): unknown[] {
  return [
    { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } },
    { harness: "pi", config: { model: "openai/m", tools: ["echo"], bindings: [{ alias: "a", parameters: { x: 1 } }] }, credentials: [{ binding: "a", value: "tok" }] },
    { harness: "pi", config: { model: "openai/m", tools: [], bindings: [{ alias: "r", executor: "0".repeat(32), runtime: [{ name: "t", description: "d", input_schema: { type: "object" } }] }] } },
    { type: "user.message", text: "hi", key: "k" },
    { type: "user.interrupt" },
    { checkpoint: "0".repeat(32) },
    { binding: "a", tools: [{ name: "t", description: "d", input_schema: { type: "object" } }] },
    { connection: "c", call_id: "x", result: { content: [{ type: "text", text: "r" }] } },
    {},
  ];
}

const weird = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(null, true, 0, -1, 1e308, "", "\u0000", "\ud800", "x".repeat(70_000), [], {}, { __proto__: null }),
);

/** A JSON value `n` levels deep, as text. */
const deep = (n: number, open = "[", close = "]") => `${open.repeat(n)}${close.repeat(n)}`;

function bodyArb(t: Targets): fc.Arbitrary<{ bytes: Uint8Array; kind: string }> {
  const base = fc.constantFrom(...baseBodies(t));
  const text = (kind: string, a: fc.Arbitrary<string>) => a.map((s) => ({ bytes: enc.encode(s), kind }));
  const mutated = fc.tuple(base, fc.string({ maxLength: 12 }), weird).map(([b, k, v]) => {
    const copy = JSON.parse(JSON.stringify(b)) as Record<string, unknown>;
    const keys = Object.keys(copy);
    const pick = keys.length && k.length % 2 === 0 ? keys[k.length % keys.length]! : k;
    copy[pick] = v;
    return JSON.stringify(copy);
  });
  const nestedIn = fc.tuple(fc.constantFrom(63, 64, 65, 200, 5_000, 20_000), fc.constantFrom("[", "{\"a\":")).map(([n, o]) => {
    const inner = o === "[" ? deep(n) : `${o.repeat(n)}1${"}".repeat(n)}`;
    return `{"harness":"pi","config":{"model":"openai/m","tools":[],"bindings":[{"alias":"a","parameters":${inner}}]}}`;
  });
  return fc.oneof(
    { weight: 3, arbitrary: base.map((b) => ({ bytes: enc.encode(JSON.stringify(b)), kind: "valid" })) },
    { weight: 6, arbitrary: text("mutated", mutated) },
    { weight: 2, arbitrary: text("nested", nestedIn) },
    { weight: 1, arbitrary: text("deep", fc.constantFrom(deep(100_000), deep(65), deep(20_000, "{\"a\":", "}"))) },
    { weight: 2, arbitrary: text("json", fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v))) },
    {
      weight: 2,
      arbitrary: text(
        "syntax",
        fc.constantFrom("{", "}", "{}{}", "{} x", "[]", "null", '"str"', "{'a':1}", '{"type":"user.message","text":"a"} ', '{"a":1,}', "{\"a\":01}", "\u0000", " ", "\n\n", "{\"type\":\"user.message\",\"text\":\"a\",\"text\":5}", "{\"__proto__\":{\"x\":1}}", "{\"constructor\":{\"prototype\":{}}}"),
      ),
    },
    { weight: 1, arbitrary: text("bom", base.map((b) => `\ufeff${JSON.stringify(b)}`)) },
    {
      weight: 2,
      arbitrary: fc.tuple(base, fc.uint8Array({ minLength: 1, maxLength: 8 })).map(([b, junk]) => {
        const j = enc.encode(JSON.stringify(b));
        const out = new Uint8Array(j.length + junk.length + 2);
        out.set(j.subarray(0, j.length - 1));
        out.set([0x22, 0xff, ...junk], j.length - 1); // invalid UTF-8 inside the object
        out[out.length - 1] = 0x7d;
        return { bytes: out, kind: "utf8" };
      }),
    },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((bytes) => ({ bytes, kind: "binary" })) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(t.bodyCap - 10, t.bodyCap, t.bodyCap + 1, t.bodyCap * 3).map((n) => ({
        bytes: enc.encode(`{"type":"user.message","text":"${"x".repeat(Math.max(0, n - 40))}"}`),
        kind: "size",
      })),
    },
    { weight: 1, arbitrary: fc.constant({ bytes: new Uint8Array(0), kind: "empty" }) },
  );
}

function headersArb(t: Targets): fc.Arbitrary<[string, string][]> {
  const auth = fc.oneof(
    { weight: 40, arbitrary: fc.constantFrom(...t.tokens).map((k) => `Bearer ${k}`) },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        "",
        "Bearer",
        "Bearer ",
        "bearer x",
        "Basic dXNlcjpwYXNz",
        `Bearer ${"x".repeat(8192)}`,
        "Bearer svci.",
        "Bearer svci.e30.AAAA",
        "Bearer svci.%%%.###",
        `Bearer ${t.tokens[0]} extra`,
        `Bearer\t${t.tokens[0]}`,
      ),
    },
  );
  const ct = fc.constantFrom("application/json", "application/json; charset=utf-8", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "", "application/json; charset=latin1");
  const accept = fc.constantFrom("text/event-stream", "application/json", "*/*", "text/event-stream;q=0.1, application/json", "TEXT/EVENT-STREAM", "");
  const lastEventId = fc.oneof(fc.constantFrom(...t.cursors), fc.constantFrom("", "x", "x".repeat(600), "%00"), hex(32));
  const extra = fc.constantFrom<[string, string]>(
    ["Upgrade", "websocket"],
    ["Sec-WebSocket-Protocol", "svc-rpc, svc-auth.abc"],
    ["Origin", "https://evil.example"],
    ["X-Request-ID", "client-id"],
    ["traceparent", "00-zz-zz-01"],
    ["traceparent", `00-${"a".repeat(32)}-${"b".repeat(16)}-01`],
    ["Content-Encoding", "gzip"],
    ["Expect", "100-continue"],
  );
  return fc
    .record(
      {
        auth: fc.option(auth, { freq: 8 }),
        ct: fc.option(ct, { freq: 2 }),
        accept: fc.option(accept, { freq: 3 }),
        lastEventId: fc.option(lastEventId, { freq: 4 }),
        extra: fc.array(extra, { maxLength: 2 }),
      },
    )
    .map((h) => {
      const out: [string, string][] = [];
      if (h.auth != null) out.push(["Authorization", h.auth]);
      if (h.ct != null) out.push(["Content-Type", h.ct]);
      if (h.accept != null) out.push(["Accept", h.accept]);
      if (h.lastEventId != null) out.push(["Last-Event-ID", h.lastEventId]);
      out.push(...h.extra);
      return out;
    });
}

/** How the body is framed: honest length, a length that lies (short or long), or chunked. */
const framingArb = fc.constantFrom("length", "length", "length", "chunked", "short", "long", "none");

export function requestArb(t: Targets): fc.Arbitrary<RawRequest> {
  const method = fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom("GET", "POST") },
    { weight: 1, arbitrary: fc.constantFrom("PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "get", "FOO") },
  );
  return fc.tuple(method, pathArb(t), queryArb(t), headersArb(t), bodyArb(t), framingArb).map(([m, path, query, headers, body, framing]) => {
    const h = [...headers];
    let bytes = body.bytes;
    if (m === "GET" || m === "HEAD") bytes = framing === "length" ? new Uint8Array(0) : bytes;
    if (framing === "length" || framing === "short" || framing === "long") {
      const declared = framing === "short" ? Math.max(0, bytes.length - 3) : framing === "long" ? bytes.length + 7 : bytes.length;
      h.push(["Content-Length", String(declared)]);
    } else if (framing === "chunked") {
      h.push(["Transfer-Encoding", "chunked"]);
    } else bytes = new Uint8Array(0);
    return { method: m, target: `${path}${query}`, headers: h, body: bytes, kind: `${body.kind}/${framing}` };
  });
}
