/**
 * The runner-host's control socket to RunnerPool: hello with its harnesses, keepalive pings the
 * pool answers without waking, and reconnection with backoff when the socket drops (a deploy, an
 * object restart, or the local stack still starting).
 */
import { randomBytes } from "node:crypto";
import WebSocket from "ws";
import { CONTROL_PATH, ControlDownSchema, PING, RUNNER_PROTOCOL, type ControlUp } from "../src/shared/runner-protocol.ts";
import type { Logger } from "./log.ts";

/** Placeholder capacity until the harness pool reports real figures. */
const CAPACITY = { loaded: 0, loaded_limit: 1024, idle: 0 };
const BOOT = randomBytes(16).toString("hex");

/** Keepalive interval, ms: well inside proxies' idle cut-offs (about 100 s at the edge). */
const PING_MS = 20_000;
/** Reconnect backoff bounds, ms. */
const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5_000;

export type ControlOptions = {
  baseUrl: string;
  secret: string;
  runnerId: string;
  harnesses: string[];
  log: Logger;
  onWelcome?: () => void;
};

export class ControlLink {
  readonly #o: ControlOptions;
  #ws: WebSocket | undefined;
  #stopped = false;
  #draining = false;
  #backoff = BACKOFF_MIN_MS;
  #ping: NodeJS.Timeout | undefined;
  #retry: NodeJS.Timeout | undefined;

  constructor(o: ControlOptions) {
    this.#o = o;
  }

  start(): void {
    this.#connect();
  }

  drain(): void {
    this.#draining = true;
    this.#send({ type: "status", draining: true, capacity: CAPACITY });
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#ping);
    clearTimeout(this.#retry);
    this.#ws?.close(1001, "runner-host stopping");
  }

  #connect(): void {
    const url = new URL(CONTROL_PATH, this.#o.baseUrl);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${this.#o.secret}` } });
    this.#ws = ws;
    ws.on("open", () => {
      this.#send({
        type: "hello",
        protocol: RUNNER_PROTOCOL,
        runner_id: this.#o.runnerId,
        harnesses: this.#o.harnesses,
        draining: this.#draining,
        boot: BOOT,
        capacity: CAPACITY,
      });
      this.#ping = setInterval(() => ws.readyState === WebSocket.OPEN && ws.send(PING), PING_MS);
    });
    ws.on("message", (data) => {
      const text = data.toString();
      if (text === "pong") return;
      const m = ControlDownSchema.safeParse(safeJson(text));
      if (!m.success) {
        this.#o.log("warn", "invalid control message from pool");
        return;
      }
      if (m.data.type === "welcome") {
        this.#backoff = BACKOFF_MIN_MS;
        this.#o.log("info", "runner-host connected", { runner_id: this.#o.runnerId });
        this.#o.onWelcome?.();
      }
    });
    ws.on("unexpected-response", (_req, res) => {
      this.#o.log("warn", "control socket refused", { status: res.statusCode });
    });
    ws.on("error", (e) => this.#o.log("debug", "control socket error", { error: e.message }));
    ws.on("close", () => {
      clearInterval(this.#ping);
      if (this.#stopped) return;
      this.#retry = setTimeout(() => this.#connect(), this.#backoff);
      this.#backoff = Math.min(this.#backoff * 2, BACKOFF_MAX_MS);
    });
  }

  #send(m: ControlUp): void {
    if (this.#ws?.readyState === WebSocket.OPEN) this.#ws.send(JSON.stringify(m));
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
