/**
 * What the runner-host's two kinds of outbound WebSocket (control and session links) share:
 * dialling with the runner secret, reconnect backoff, and a keepalive that also notices a dead peer
 * (a half-open TCP connection never reports `close` by itself).
 */
import WebSocket from "ws";
import { PING, PING_MS, PONG, SILENT_AFTER_MS } from "../src/shared/runner-protocol.ts";

/** Reconnect backoff bounds, ms: fast enough to ride out a deploy, slow enough not to hammer. */
export const BACKOFF_MIN_MS = 100;
export const BACKOFF_MAX_MS = 5_000;

/**
 * Why the runner secret must not be sent to `baseUrl`, or undefined when it may: over plain
 * `http:`/`ws:` the secret is only sent to a loopback host (the local stack); anywhere else it
 * would cross the network readable, so `https:`/`wss:` is required.
 */
export function insecureSecretTarget(baseUrl: string): string | undefined {
  const url = URL.parse(baseUrl);
  if (!url) return `${JSON.stringify(baseUrl)} is not a URL`;
  if (url.protocol === "https:" || url.protocol === "wss:") return undefined;
  if (url.protocol !== "http:" && url.protocol !== "ws:") return `${url.protocol} is not http(s) or ws(s)`;
  if (isLoopback(url.hostname)) return undefined;
  return `the runner secret is sent only over https:// or wss:// (plain ${url.protocol.slice(0, -1)} only to a loopback host), and ${url.host} is not loopback`;
}

function isLoopback(hostname: string): boolean {
  if (hostname === "localhost" || hostname === "[::1]") return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/**
 * `ws(s)://<base><path>?<query>`: `path` goes below the base URL's own path, so a service served
 * under a prefix (`https://example.com/agents`, a reverse proxy that strips it) is dialled there.
 */
export function dialUrl(baseUrl: string, path: string, query: Record<string, string> = {}): URL {
  const url = new URL(baseUrl);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}${path}`;
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  return url;
}

/** A WebSocket to `dialUrl(...)` with the runner secret as bearer (the Worker checks it). */
export function dial(baseUrl: string, path: string, secret: string, query: Record<string, string> = {}): WebSocket {
  const url = dialUrl(baseUrl, path, query);
  // No permessage-deflate: link messages are small JSON, and compressing each one cost more CPU
  // in the runner-host (and workerd) than anything else on the link (bench/RESULTS.md, profile).
  const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${secret}` }, perMessageDeflate: false });
  // A refused upgrade: hand the status and the service's error message to `refused` listeners,
  // then end the attempt. Without `terminate` ws leaves the handshake open when someone listens
  // for this event.
  ws.on("unexpected-response", (_req, res) => {
    let body = "";
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      ws.emit("refused", res.statusCode ?? 0, errorMessage(body));
      ws.terminate();
    };
    res.setEncoding("utf8");
    res.on("data", (d: string) => {
      if (body.length < MAX_REFUSAL_BODY) body += d;
    });
    res.on("end", finish);
    res.on("error", finish);
    res.on("close", finish);
  });
  return ws;
}

/** Bytes of a refused upgrade's body read for its error message: the service's error shape is small. */
const MAX_REFUSAL_BODY = 4096;

/** `error.message` of a body in the service's error shape (docs/api.md "Errors"), or "" for anything else. */
function errorMessage(body: string): string {
  const m = (parseJson(body) as { error?: { message?: unknown } } | undefined)?.error?.message;
  return typeof m === "string" ? m.slice(0, 500) : "";
}

/** Exponential backoff with jitter, reset after a successful connection. */
export class Backoff {
  #next = BACKOFF_MIN_MS;

  /** The delay before the next attempt, ms. */
  next(): number {
    const base = this.#next;
    this.#next = Math.min(this.#next * 2, BACKOFF_MAX_MS);
    // ±25 % jitter so a fleet of runner-hosts does not reconnect in lockstep after a deploy.
    return Math.round(base * (0.75 + Math.random() / 2));
  }

  reset(): void {
    this.#next = BACKOFF_MIN_MS;
  }
}

/**
 * Pings every `PING_MS` and terminates the socket when nothing arrived for `SILENT_AFTER_MS`
 * (`onSilent` first: the peer has been away that long already). Returns a function that stops it
 * (call it on close). Pongs are swallowed by the caller. `timing`: for tests.
 */
export function keepAlive(ws: WebSocket, onSilent?: () => void, timing = { pingMs: PING_MS, silentMs: SILENT_AFTER_MS }): () => void {
  let lastSeen = Date.now();
  const seen = () => (lastSeen = Date.now());
  ws.on("message", seen);
  const timer = setInterval(() => {
    if (Date.now() - lastSeen > timing.silentMs) {
      onSilent?.();
      return ws.terminate();
    }
    if (ws.readyState === WebSocket.OPEN) ws.send(PING);
  }, timing.pingMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    ws.off("message", seen);
  };
}

export function isPong(text: string): boolean {
  return text === PONG;
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
