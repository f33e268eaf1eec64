/**
 * The reference harness's provider client transport (runner-host/http-fetch.ts):
 * fetch over Node's own HTTP client. Each behaviour a provider SDK can see is checked against a
 * real local server for this client and for Node's built-in fetch side by side, so "answers as the
 * built-in fetch does" is a measured claim; the fallback it hands other requests to must not be
 * reached for those. https runs against a self-signed certificate made for these tests
 * (test/fixtures/tls): refused by both clients, and trusted through NODE_EXTRA_CA_CERTS in a child
 * Node process. Turns through it, with the real SDKs, are in harness-turns.test.ts and e2e.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import https from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { promisify } from "node:util";
import { brotliCompressSync, deflateSync, gzipSync, zstdCompressSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpFetch } from "../../runner-host/http-fetch.ts";

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;
const routes = new Map<string, Handler>();
const connections: Socket[] = [];
let base = "";
let other = ""; // a second origin: the same server on another address
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => routes.get(new URL(req.url!, "http://x").pathname)!(req, Buffer.concat(chunks).toString(), res));
});
server.on("connection", (s) => connections.push(s));
/** A self-signed certificate for 127.0.0.1 and localhost (valid to 2126), made for these tests only. */
const TLS_CERT = new URL("../fixtures/tls/loopback.crt", import.meta.url).pathname;
const tls = https.createServer({ cert: readFileSync(TLS_CERT), key: readFileSync(new URL("../fixtures/tls/loopback.key", import.meta.url)) }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => res.end(`${req.method} over TLS: ${Buffer.concat(chunks)}`));
});
let tlsBase = "";

beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  base = `http://127.0.0.1:${port}`;
  other = `http://localhost:${port}`;
  await new Promise<void>((r) => tls.listen(0, "127.0.0.1", r));
  tlsBase = `https://127.0.0.1:${(tls.address() as AddressInfo).port}`;
});
afterAll(() => {
  for (const s of [server, tls]) (s.closeAllConnections(), s.close());
});

function route(path: string, h: Handler): string {
  routes.set(path, h);
  return `${base}${path}`;
}

/** Fails the test if reached: every request below is one the http client must take itself. */
const noFallback = (() => Promise.reject(new Error("the fallback was called"))) as unknown as typeof fetch;
const clients: [string, typeof fetch][] = [
  ["the harness's http fetch", httpFetch(noFallback)],
  ["Node's built-in fetch", fetch],
];

async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error("did not fail");
}

describe.each(clients)("%s", (_name, f) => {
  it("sends a POST's body whole with its length, and answers with the status, headers and body sent", async () => {
    const url = route("/echo", (req, body, res) => {
      res.setHeader("set-cookie", ["a=1", "b=2"]);
      res.writeHead(201, "Made", { "content-type": "application/json", "x-seen": JSON.stringify({ method: req.method, len: req.headers["content-length"], type: req.headers["content-type"], auth: req.headers.authorization, te: req.headers["transfer-encoding"] ?? null }) });
      res.end(JSON.stringify({ body }));
    });
    const res = await f(url, { method: "post", headers: { authorization: "Bearer k", "content-type": "application/json" }, body: '{"q":"héllo"}' });
    expect([res.status, res.statusText, res.ok, res.url, res.redirected]).toEqual([201, "Made", true, url, false]);
    expect(JSON.parse(res.headers.get("x-seen")!)).toEqual({ method: "POST", len: "14", type: "application/json", auth: "Bearer k", te: null });
    expect(res.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
    expect(await res.json()).toEqual({ body: '{"q":"héllo"}' });
  });

  it("gives a string body text/plain and a POST without a body a zero length", async () => {
    const url = route("/seen", (req, _body, res) => res.end(JSON.stringify([req.headers["content-type"] ?? null, req.headers["content-length"] ?? null])));
    expect(await (await f(url, { method: "POST", body: "x" })).json()).toEqual(["text/plain;charset=UTF-8", "1"]);
    expect(await (await f(url, { method: "POST" })).json()).toEqual([null, "0"]);
    expect(await (await f(url, { method: "POST", body: new URLSearchParams({ a: "b c" }) })).json()).toEqual(["application/x-www-form-urlencoded;charset=UTF-8", "5"]);
    expect(await (await f(url, { method: "PUT", body: new Uint8Array([1, 2, 3]) })).json()).toEqual([null, "3"]);
  });

  it("hands an event stream's bytes on as they arrive, before the answer ends", async () => {
    let finish!: () => void;
    const url = route("/live", (_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: first\n\n");
      finish = () => res.end("data: last\n\n");
    });
    const reader = (await f(url)).body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe("data: first\n\n");
    finish();
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    expect(rest).toBe("data: last\n\n");
  });

  it("rejects a request that cannot connect with TypeError \"fetch failed\" and the cause", async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const { port } = closed.address() as AddressInfo;
    await new Promise((r) => closed.close(r));
    const e = (await failure(f(`http://127.0.0.1:${port}/`))) as TypeError;
    expect([e.constructor, e.message, (e.cause as NodeJS.ErrnoException).code]).toEqual([TypeError, "fetch failed", "ECONNREFUSED"]);
  });

  it("rejects with the signal's reason when aborted before the answer, and fails the body with it when aborted while it is read", async () => {
    const held: ServerResponse[] = [];
    const waiting = route("/held", (_req, _body, res) => void held.push(res));
    const before = new AbortController();
    const pending = f(waiting, { signal: before.signal });
    await expect.poll(() => held.length, { timeout: 5_000 }).toBe(1);
    const reason = new Error("stop now");
    before.abort(reason);
    expect(await failure(pending)).toBe(reason);
    expect(await failure(f(waiting, { signal: AbortSignal.abort(reason) }))).toBe(reason);

    const url = route("/half", (_req, _body, res) => (res.writeHead(200, { "content-type": "text/event-stream" }), res.write("data: a\n\n")));
    const during = new AbortController();
    const reader = (await f(url, { signal: during.signal })).body!.getReader();
    await reader.read();
    during.abort(reason);
    expect(await failure(reader.read())).toBe(reason);
  });

  it("fails a body the connection cut short instead of ending it", async () => {
    const chunked = route("/cut", (_req, _body, res) => (res.writeHead(200, { "content-type": "text/event-stream" }), res.write("data: a\n\n", () => res.destroy())));
    const sized = route("/short", (_req, _body, res) => (res.writeHead(200, { "content-length": "100" }), res.write("ten bytes!", () => res.destroy())));
    for (const url of [chunked, sized]) {
      const res = await f(url);
      const e = (await failure(res.text())) as TypeError;
      expect([url, e.constructor, e.message]).toEqual([url, TypeError, "terminated"]);
    }
  });

  it("decodes gzip, deflate, Brotli and zstd answers", async () => {
    const text = "data: ".repeat(500);
    const coded: [string, (t: string) => Buffer][] = [["gzip", gzipSync], ["deflate", deflateSync], ["br", brotliCompressSync], ["zstd", zstdCompressSync]];
    for (const [coding, code] of coded) {
      const url = route(`/${coding}`, (_req, _body, res) => (res.writeHead(200, { "content-encoding": coding }), res.end(code(text))));
      expect([coding, await (await f(url)).text()]).toEqual([coding, text]);
    }
  });

  it("follows redirects: 307 keeps the method and body, 303 goes on as a GET without them, Authorization stays within the origin", async () => {
    const seen = route("/seen-all", (req, body, res) => res.end(JSON.stringify({ method: req.method, body, type: req.headers["content-type"] ?? null, auth: req.headers.authorization ?? null })));
    route("/r307", (_req, _body, res) => (res.writeHead(307, { location: "/seen-all" }), res.end()));
    route("/r303", (_req, _body, res) => (res.writeHead(303, { location: `${other}/seen-all` }), res.end()));
    const init = { method: "POST", headers: { authorization: "Bearer k", "content-type": "application/json" }, body: "{}" };
    const kept = await f(`${base}/r307`, init);
    expect([kept.url, kept.redirected, await kept.json()]).toEqual([seen, true, { method: "POST", body: "{}", type: "application/json", auth: "Bearer k" }]);
    const moved = await f(`${base}/r303`, init);
    expect([moved.url, await moved.json()]).toEqual([`${other}/seen-all`, { method: "GET", body: "", type: null, auth: null }]);
  });

  it("returns a redirect itself with redirect \"manual\", rejects it with \"error\", and follows 20 in a row but not 21", async () => {
    // /chain?n=k redirects k more times, then answers with how many it took.
    route("/chain", (req, _body, res) => {
      const n = Number(new URL(req.url!, base).searchParams.get("n"));
      if (n === 0) return void res.end("arrived");
      res.writeHead(302, { location: `/chain?n=${n - 1}` });
      res.end();
    });
    const manual = await f(`${base}/chain?n=1`, { redirect: "manual" });
    expect([manual.status, manual.headers.get("location")]).toEqual([302, "/chain?n=0"]);
    expect(await failure(f(`${base}/chain?n=1`, { redirect: "error" }))).toBeInstanceOf(TypeError);
    const twenty = await f(`${base}/chain?n=20`);
    expect([twenty.url, twenty.redirected, await twenty.text()]).toEqual([`${base}/chain?n=0`, true, "arrived"]);
    expect(await failure(f(`${base}/chain?n=21`))).toBeInstanceOf(TypeError);
  });

  it("answers 204 and HEAD with no body", async () => {
    const url = route("/none", (req, _body, res) => (res.writeHead(req.method === "HEAD" ? 200 : 204, { "content-length": req.method === "HEAD" ? "5" : "0" }), res.end()));
    expect((await f(url, { method: "DELETE" })).body).toBeNull();
    const head = await f(url, { method: "HEAD" });
    expect([head.status, head.body, head.headers.get("content-length")]).toEqual([200, null, "5"]);
  });
  it("rejects a header fetch refuses with a TypeError, sending nothing", async () => {
    let sent = 0;
    const url = route("/never", (_req, _body, res) => (sent++, res.end()));
    expect(await failure(f(url, { headers: { "x-bad": "a\nb" } }))).toBeInstanceOf(TypeError);
    expect(sent).toBe(0);
  });

  it("refuses a certificate the machine does not trust", async () => {
    const e = (await failure(f(`${tlsBase}/`))) as TypeError;
    expect([e.constructor, e.message, (e.cause as NodeJS.ErrnoException).code]).toEqual([TypeError, "fetch failed", "DEPTH_ZERO_SELF_SIGNED_CERT"]);
  });
});

describe("the harness's http fetch", () => {
  it("speaks https to a server whose certificate the process trusts (NODE_EXTRA_CA_CERTS)", async () => {
    const module = new URL("../../runner-host/http-fetch.ts", import.meta.url).href;
    const script = `const { httpFetch } = await import(${JSON.stringify(module)});
      const f = httpFetch(() => Promise.reject(new Error("the fallback was called")));
      const r = await f(process.argv[1], { method: "POST", body: "{}" });
      console.log(JSON.stringify([r.status, r.url, await r.text()]));`;
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script, `${tlsBase}/tls`], { env: { PATH: process.env.PATH, NODE_EXTRA_CA_CERTS: TLS_CERT } });
    expect(JSON.parse(stdout)).toEqual([200, `${tlsBase}/tls`, "POST over TLS: {}"]);
  });

  it("keeps the connection alive between requests", async () => {
    const url = route("/ka", (_req, _body, res) => res.end("ok"));
    const f = httpFetch(noFallback);
    await (await f(url)).text();
    const before = connections.length;
    for (let i = 0; i < 3; i++) await (await f(url, { method: "POST", body: "x" })).text();
    expect(connections.length).toBe(before);
  });

  it("closes a kept-alive connection once it was idle for its idle time, or the server's shorter Keep-Alive hint, and no sooner", async () => {
    // An idle close is the client's: the server here would keep the connection for a minute.
    const idleFor = async (f: typeof fetch, path: string, hint?: number): Promise<number> => {
      let served = 0;
      const closed = new Promise<number>((resolve) => {
        route(path, (req, _body, res) => {
          req.socket.once("end", () => resolve(performance.now() - served));
          if (hint) res.setHeader("keep-alive", `timeout=${hint}`);
          res.end("ok", () => (served = performance.now()));
        });
      });
      await (await f(`${base}${path}`)).text();
      return closed;
    };
    const keep = server.keepAliveTimeout;
    server.keepAliveTimeout = 60_000;
    try {
      const idle = await idleFor(httpFetch(noFallback, { idleMs: 1_000, silenceMs: 60_000 }), "/idle");
      expect(idle).toBeGreaterThanOrEqual(990);
      expect(idle).toBeLessThan(2_500);
      // A hint of 3 s: Node's agent closes 1 s before the server would, long before the idle time.
      const hinted = await idleFor(httpFetch(noFallback, { idleMs: 30_000, silenceMs: 60_000 }), "/hinted", 3);
      expect(hinted).toBeGreaterThanOrEqual(1_990);
      expect(hinted).toBeLessThan(3_500);
    } finally {
      server.keepAliveTimeout = keep;
    }
  });

  it("fails a request with no answer, and a body, after its silence time without a byte, and not while bytes still come", async () => {
    // Silence 600 ms: gaps of 200 ms pass, gaps of 1.2 s (twice the silence) fail.
    const f = httpFetch(noFallback, { idleMs: 4_000, silenceMs: 600 });
    const late = route("/late", (_req, _body, res) => void setTimeout(() => res.end("too late"), 1_200));
    const started = performance.now();
    const err = (await failure(f(late))) as TypeError;
    expect(performance.now() - started).toBeGreaterThanOrEqual(590);
    expect([err.name, err.message, (err.cause as Error).message]).toEqual(["TypeError", "fetch failed", "no bytes for 0.6 s"]);

    const stalls = route("/stalls", (_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: 1\n\n");
      setTimeout(() => res.end("data: 2\n\n"), 1_200);
    });
    expect(((await failure((await f(stalls)).text())) as TypeError).message).toBe("terminated");

    const trickles = route("/trickles", (_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      let n = 0;
      const next = () => (++n < 5 ? (res.write(`data: ${n}\n\n`), setTimeout(next, 200)) : res.end(`data: ${n}\n\n`));
      setTimeout(next, 200);
    });
    expect(await (await f(trickles)).text()).toBe([1, 2, 3, 4, 5].map((n) => `data: ${n}\n\n`).join(""));
  });

  it("hands an answer on one socket read at a time, not one piece per HTTP chunk", async () => {
    const url = route("/many", (_req, _body, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.socket!.cork();
      for (let i = 0; i < 2_000; i++) res.write(`data: {"i":${i}}\n\n`);
      res.socket!.uncork();
      res.end();
    });
    const reader = (await httpFetch(noFallback)(url)).body!.getReader();
    let reads = 0;
    let bytes = 0;
    for (let r = await reader.read(); !r.done; r = await reader.read()) (reads++, (bytes += r.value.byteLength));
    expect(bytes).toBe(Array.from({ length: 2_000 }, (_, i) => `data: {"i":${i}}\n\n`).join("").length);
    expect(reads).toBeLessThan(50);
  });

  it("hands what it does not take to the fallback unchanged", async () => {
    const calls: unknown[][] = [];
    const fallback = (async (...args: unknown[]) => (calls.push(args), new Response("fallback"))) as unknown as typeof fetch;
    const f = httpFetch(fallback);
    const stream = new ReadableStream();
    const form = new FormData();
    const request = new Request(`${base}/x`);
    const cases: [Parameters<typeof fetch>[0], RequestInit | undefined][] = [
      [request, undefined],
      [`${base}/x`, { method: "POST", body: stream, duplex: "half" } as RequestInit],
      [`${base}/x`, { method: "POST", body: form }],
      [`${base}/x`, { method: "POST", body: new Blob(["b"]) }],
      [`${base}/x`, { integrity: "sha256-x" }],
      ["ftp://example.test/x", undefined],
      ["http://user:pw@example.test/x", undefined],
      ["/relative", undefined],
      [`${base}/x`, { method: "GET", body: "not allowed" }],
      [`${base}/x`, { method: "PROPFIND" }],
    ];
    for (const [input, init] of cases) expect(await (await f(input, init)).text()).toBe("fallback");
    expect(calls).toEqual(cases.map(([input, init]) => [input, init]));
  });
});
