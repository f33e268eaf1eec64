/**
 * The fetch the reference harness's provider clients call: Node's own HTTP client (node:http,
 * node:https) behind the fetch signature, in place of Node's built-in fetch.
 *
 * Why: the built-in fetch is a bundled copy of undici, whose HTTP parser is a WebAssembly module
 * and whose request pipeline is the whole fetch standard. With this client a harness process
 * holds ~3 MiB less private memory, and that room lets it run V8's top tier, which a long reply's
 * parsing needs, within 5 MiB per session at 16 sessions (bench/RESULTS.md "Twenty-first session").
 *
 * It takes what provider SDKs send: an http(s) URL given as a string or URL, a method, headers and
 * a body given whole (a string, bytes or URLSearchParams). Anything else — a Request object, a
 * streamed, Blob or FormData body, an undici `dispatcher`, `integrity` — goes to `fallback` (the
 * built-in fetch) unchanged. Where an SDK can tell, it answers as the built-in fetch does: a network
 * failure rejects with `TypeError("fetch failed", { cause })`, an abort with the signal's reason
 * (before the answer and while its body is read), a body cut short errors instead of ending,
 * redirects are followed (at most 20; 303, and 301/302 of a POST, continue as GET without the body;
 * `Authorization` is dropped across origins; `redirect: "manual"` and `"error"` honoured), gzip,
 * deflate, Brotli and zstd answers are decoded, and `url`/`redirected` name where it ended.
 * Connections are kept alive between requests like the built-in fetch's (an idle one closes after
 * 4 s, or a second before a shorter `Keep-Alive: timeout` the server sent), and a request or body with no bytes for 300 s
 * fails, the built-in fetch's own defaults.
 */
import type { Agent, IncomingMessage, request as Request } from "node:http";
import { pipeline, type Readable } from "node:stream";

/** Redirects followed per request, at most: the fetch standard's limit. */
const MAX_REDIRECTS = 20;
/** An idle kept-alive connection's life, ms: the built-in fetch's default (servers often close at 5 s). */
const IDLE_MS = 4_000;
/** No bytes either way for this long fails the request or its body, ms: the built-in fetch's default. */
const SILENCE_MS = 300_000;
/** How long a connection may stay quiet, ms; the defaults above, other values for tests at their edges. */
export type Quiet = { idleMs: number; silenceMs: number };
type Client = { request: typeof Request; agent: Agent };
/** Statuses whose answer has no body (the fetch standard's null body statuses). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
const REDIRECT = new Set([301, 302, 303, 307, 308]);
/** Request headers that describe its body, dropped when a redirect turns it into a GET. */
const BODY_HEADERS = ["content-type", "content-length", "content-encoding", "content-language", "content-location"];
/**
 * The `init` options this client takes: the first five it follows, the rest mean nothing outside a
 * browser and are ignored, as by the built-in fetch. Any other option (`dispatcher`, `integrity`)
 * sends the request to the fallback.
 */
const TAKEN = new Set(["method", "headers", "body", "signal", "redirect", "keepalive", "cache", "credentials", "mode", "referrer", "referrerPolicy", "duplex", "priority", "window"]);

type Plain = { url: URL; method: string; headers: Record<string, string>; body: string | Uint8Array | null; redirect: NonNullable<RequestInit["redirect"]> };

export function httpFetch(fallback: typeof fetch, quiet: Quiet = { idleMs: IDLE_MS, silenceMs: SILENCE_MS }): typeof fetch {
  /**
   * The client per scheme, loaded at its first request: node:https brings TLS with it, and loading
   * both at the harness's start put ~28 ms before its `ready` (a process the built-in fetch would
   * have started without them; https is never loaded for a provider reached over http).
   */
  const clients = new Map<string, Client>();
  const client = (protocol: string): Client => {
    let c = clients.get(protocol);
    if (!c) {
      const mod = process.getBuiltinModule(protocol === "https:" ? "node:https" : "node:http");
      c = { request: mod.request, agent: new mod.Agent({ keepAlive: true, timeout: quiet.idleMs }) };
      clients.set(protocol, c);
    }
    return c;
  };
  return (input, init) => {
    let plain: Plain | undefined;
    try {
      plain = plainRequest(input, init);
    } catch (e) {
      return Promise.reject(e); // headers fetch refuses: a rejection, as from fetch, never a throw
    }
    return plain ? send(client, quiet.silenceMs, plain, init?.signal ?? undefined, 0) : fallback(input, init);
  };
}

/** The request as this client sends it, or undefined when only the built-in fetch can. */
function plainRequest(input: Parameters<typeof fetch>[0], init: RequestInit = {}): Plain | undefined {
  if (typeof input !== "string" && !(input instanceof URL)) return undefined;
  if (Object.keys(init).some((k) => !TAKEN.has(k))) return undefined;
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    return undefined; // the built-in fetch rejects it with its own TypeError
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.username || url.password) return undefined;
  const method = normalMethod(init.method ?? "GET");
  if (method === undefined) return undefined;
  const raw = init.body ?? null;
  let body: string | Uint8Array | null;
  let type: string | undefined;
  if (raw === null) body = null;
  else if (typeof raw === "string") [body, type] = [raw, "text/plain;charset=UTF-8"];
  else if (raw instanceof URLSearchParams) [body, type] = [raw.toString(), "application/x-www-form-urlencoded;charset=UTF-8"];
  else if (raw instanceof ArrayBuffer) body = new Uint8Array(raw);
  else if (ArrayBuffer.isView(raw)) body = new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);
  else return undefined;
  if (body !== null && (method === "GET" || method === "HEAD")) return undefined; // a TypeError there
  const headers: Record<string, string> = {};
  new Headers(init.headers).forEach((value, name) => (headers[name] = value));
  if (type && headers["content-type"] === undefined) headers["content-type"] = type;
  if (body !== null) headers["content-length"] = String(typeof body === "string" ? Buffer.byteLength(body) : body.byteLength);
  else if (method === "POST" || method === "PUT") headers["content-length"] = "0";
  headers["accept"] ??= "*/*";
  headers["user-agent"] ??= "node";
  headers["accept-encoding"] ??= url.protocol === "https:" ? "br, gzip, deflate" : "gzip, deflate";
  return { url, method, headers, body, redirect: init.redirect ?? "follow" };
}

/** The method as fetch sends it (it upper-cases these six only), or undefined for any other: the fallback's. */
function normalMethod(m: string): string | undefined {
  const upper = m.toUpperCase();
  if (["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"].includes(upper)) return upper;
  return m === "PATCH" ? m : undefined;
}

function send(client: (protocol: string) => Client, silenceMs: number, r: Plain, signal: AbortSignal | undefined, redirects: number): Promise<Response> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<Response>((resolve, reject) => {
    const { request, agent } = client(r.url.protocol);
    const req = request(r.url, { method: r.method, headers: r.headers, agent });
    const onAbort = () => {
      req.destroy();
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    const settled = () => signal?.removeEventListener("abort", onAbort);
    // The socket's timeout stays set while the body is read, so a silent body fails the same way.
    req.setTimeout(silenceMs, () => req.destroy(new Error(`no bytes for ${silenceMs / 1000} s`)));
    req.on("error", (cause) => (settled(), reject(new TypeError("fetch failed", { cause }))));
    req.on("response", (res) => {
      settled();
      const status = res.statusCode ?? 0;
      const location = REDIRECT.has(status) ? res.headers.location : undefined;
      if (location === undefined || r.redirect === "manual") {
        const response = answer(res, r, redirects > 0, signal);
        return response instanceof TypeError ? reject(response) : resolve(response);
      }
      res.resume(); // drained, so the connection can be reused
      const next = redirected(r, status, location, redirects);
      if (next instanceof TypeError) return reject(next);
      send(client, silenceMs, next, signal, redirects + 1).then(resolve, reject);
    });
    req.end(r.body ?? undefined);
  });
}

/** The request a redirect asks for, or why it is not followed. */
function redirected(r: Plain, status: number, location: string, redirects: number): Plain | TypeError {
  if (r.redirect === "error") return new TypeError("fetch failed", { cause: new Error(`redirected (${status}) while redirect is "error"`) });
  if (redirects >= MAX_REDIRECTS) return new TypeError("fetch failed", { cause: new Error("redirect count exceeded") });
  let url: URL;
  try {
    url = new URL(location, r.url);
  } catch {
    return new TypeError("fetch failed", { cause: new Error(`invalid redirect location ${JSON.stringify(location)}`) });
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return new TypeError("fetch failed", { cause: new Error(`redirected to a ${url.protocol} URL`) });
  const headers = { ...r.headers };
  let { method, body } = r;
  if ((status === 303 && method !== "GET" && method !== "HEAD") || ((status === 301 || status === 302) && method === "POST")) {
    [method, body] = ["GET", null];
    for (const h of BODY_HEADERS) delete headers[h];
  }
  if (url.origin !== r.url.origin) delete headers["authorization"];
  return { ...r, url, method, headers, body };
}

function answer(res: IncomingMessage, r: Plain, wasRedirected: boolean, signal: AbortSignal | undefined): Response | TypeError {
  const status = res.statusCode ?? 0;
  const headers = new Headers();
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    try {
      headers.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
    } catch {
      // a header value the fetch standard refuses is left out, as the built-in fetch leaves it
    }
  }
  const empty = NULL_BODY.has(status) || r.method === "HEAD";
  if (empty) res.resume();
  let response: Response;
  try {
    response = new Response(empty ? null : webBody(decoded(res), res, signal), { status, statusText: res.statusMessage ?? "", headers });
  } catch (cause) {
    res.destroy();
    return new TypeError("fetch failed", { cause }); // a status outside 200–599
  }
  return located(response, r.url.href, wasRedirected);
}

/**
 * `res` with the `url` and `redirected` of the answer it stands for: a Response made by `new
 * Response` has neither, and an SDK may log or compare them.
 */
export function located(res: Response, url: string, redirected: boolean): Response {
  return Object.defineProperties(res, { url: { value: url }, redirected: { value: redirected } });
}

/** The body with its content codings undone (the last applied first); unknown codings stay. */
function decoded(res: IncomingMessage): Readable {
  const codings = (res.headers["content-encoding"] ?? "").toLowerCase().split(",").map((c) => c.trim()).filter((c) => c && c !== "identity").reverse();
  if (codings.length === 0) return res;
  const zlib = process.getBuiltinModule("node:zlib"); // loaded only when a provider compresses
  const sync = { flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH };
  const decoders: Readable[] = [];
  for (const c of codings) {
    if (c === "gzip" || c === "x-gzip") decoders.push(zlib.createGunzip(sync));
    else if (c === "deflate") decoders.push(zlib.createInflate(sync));
    else if (c === "br") decoders.push(zlib.createBrotliDecompress({ flush: zlib.constants.BROTLI_OPERATION_FLUSH, finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH }));
    else if (c === "zstd") decoders.push(zlib.createZstdDecompress());
    else return res; // a coding this client cannot undo: the bytes as sent, like the built-in fetch
  }
  return pipeline([res, ...decoders] as unknown as [Readable, Readable], () => {}) as unknown as Readable;
}

/**
 * `src` as a web stream read on demand: each pull takes what Node has buffered (one socket read's
 * worth, not one object per HTTP chunk: a provider writes each streamed delta as a chunk of its
 * own, and handing them on one by one cost the harness ~35% more CPU per delta). Node pauses the
 * socket while the buffer is full, so a slow reader holds the server back as with the built-in fetch.
 */
function webBody(src: Readable, res: IncomingMessage, signal: AbortSignal | undefined): ReadableStream<Uint8Array> {
  let done = false;
  let waiting: (() => void) | undefined;
  const wake = () => {
    const w = waiting;
    waiting = undefined;
    w?.();
  };
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  /** Marks the body finished once; false when it already was. */
  const finish = (): boolean => {
    if (done) return false;
    done = true;
    signal?.removeEventListener("abort", onAbort);
    return true;
  };
  const fail = (reason: unknown) => {
    if (!finish()) return;
    src.destroy();
    res.destroy();
    controller.error(reason);
    wake();
  };
  const onAbort = () => fail(signal!.reason);
  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        signal?.addEventListener("abort", onAbort, { once: true });
        src.on("readable", wake);
        // A connection closed before the answer's end is an error here (`aborted`), never an end.
        src.on("error", (cause) => fail(new TypeError("terminated", { cause })));
        src.on("end", () => {
          if (!finish()) return;
          c.close();
          wake();
        });
      },
      pull(c) {
        return new Promise<void>((resolve) => {
          const attempt = () => {
            if (done) return resolve();
            const chunk = src.read() as Buffer | null;
            if (chunk === null) return void (waiting = attempt);
            c.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
            resolve();
          };
          attempt();
        });
      },
      cancel() {
        finish();
        src.destroy();
        res.destroy();
      },
    },
    { highWaterMark: 0 },
  );
}
