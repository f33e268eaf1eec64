/**
 * The runner-host's control socket to RunnerPool (src/shared/runner-protocol.ts "control"): hello
 * with its boot, harnesses and capacity, a status whenever capacity or draining changes, attach
 * orders handed to the owner, keepalive pings, and reconnection with backoff when the socket drops
 * (a deploy, an object restart, or the local stack still starting).
 */
import WebSocket from "ws";
import {
  CONTROL_PATH,
  ControlDownSchema,
  RUNNER_PROTOCOL,
  type Capacity,
  type ControlDown,
  type ControlUp,
} from "../src/shared/runner-protocol.ts";
import type { Logger } from "./log.ts";
import { Backoff, dial, isPong, keepAlive, parseJson } from "./socket.ts";

export type AttachOrder = Extract<ControlDown, { t: "attach" }>;

export type ControlOptions = {
  baseUrl: string;
  secret: string;
  runnerId: string;
  /** Random per process start (the pool learns that sessions held by an older boot are gone). */
  boot: string;
  harnesses: string[];
  /** The region this runner-host announces (its RunnerPool is that region's). */
  region: string;
  log: Logger;
  /** Read at every hello and status, so the pool always sees the current figures. */
  state(): { draining: boolean; capacity: Capacity };
  onAttach(order: AttachOrder): void;
  onWelcome?(): void;
  /** Connected (welcomed) or not any more. */
  onConnectionChange?(connected: boolean): void;
  /**
   * The service answered the upgrade with an error: a wrong secret (401), a protocol or region it
   * does not accept (409). `message` is the service's error message, if it sent one.
   */
  onRefused?(status: number, message: string): void;
  /** The dial failed before any answer (DNS, connection refused, TLS, timeout). */
  onUnreachable?(error: string): void;
};

export class ControlClient {
  readonly #o: ControlOptions;
  #ws: WebSocket | undefined;
  #welcomed = false;
  #stopped = false;
  #backoff = new Backoff();
  #retry: NodeJS.Timeout | undefined;
  #lastStatus = "";
  #statusQueued = false;
  #statusForced = false;
  /** Attach orders handled on the current control socket (its statuses say so: `attaches`). */
  #attaches = 0;

  constructor(o: ControlOptions) {
    this.#o = o;
  }

  get connected(): boolean {
    return this.#welcomed && this.#ws?.readyState === WebSocket.OPEN;
  }

  start(): void {
    this.#connect();
  }

  /**
   * Sends a status if what placement decides on changed since the last one (coalesced per tick):
   * draining, `loaded`, `loaded_limit`, or, at the limit, how many sessions are idle. That count
   * moves with every turn's start and end, but the pool reads it only when `loaded` has reached
   * `loaded_limit` (each attach order there drops one idle session), so below the limit no status
   * is sent per turn: that message would reach the service while the turn's first output is on
   * its way. At the limit the count is sent as it changes: with only "some are idle" (as before),
   * the pool's count went stale and concurrent sessions were refused while idle ones could have
   * made room. The figures sent are the current ones. `always`: sent even if those figures are
   * unchanged — after an attach order, which the pool counted ahead (an idle session fewer at the
   * limit) until this status replaces its estimate.
   */
  statusChanged(always = false): void {
    this.#statusForced ||= always;
    if (this.#statusQueued) return;
    this.#statusQueued = true;
    queueMicrotask(() => {
      this.#statusQueued = false;
      const forced = this.#statusForced;
      this.#statusForced = false;
      if (!this.connected) return; // the next hello carries the figures
      const { draining, capacity } = this.#o.state();
      const figures = placementFigures(draining, capacity);
      if (figures === this.#lastStatus && !forced) return;
      this.#lastStatus = figures;
      this.#ws!.send(JSON.stringify({ t: "status", draining, capacity, attaches: this.#attaches } satisfies ControlUp));
    });
  }

  /** A message only this runner-host can originate right now (e.g. a refused attach). */
  send(m: ControlUp): void {
    if (this.#ws?.readyState === WebSocket.OPEN) this.#ws.send(JSON.stringify(m));
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retry);
    this.#ws?.close(1001, "runner-host stopping");
  }

  #connect(): void {
    const ws = dial(this.#o.baseUrl, CONTROL_PATH, this.#o.secret, { protocol: String(RUNNER_PROTOCOL), region: this.#o.region });
    this.#ws = ws;
    this.#welcomed = false;
    this.#attaches = 0;
    let answered = false;
    const stopKeepAlive = keepAlive(ws);
    ws.on("open", () => {
      answered = true;
      const { draining, capacity } = this.#o.state();
      const hello: ControlUp = {
        t: "hello",
        protocol: RUNNER_PROTOCOL,
        runner_id: this.#o.runnerId,
        boot: this.#o.boot,
        harnesses: this.#o.harnesses,
        draining,
        capacity,
      };
      this.#lastStatus = placementFigures(draining, capacity);
      ws.send(JSON.stringify(hello));
    });
    ws.on("message", (data) => {
      const text = data.toString();
      if (isPong(text)) return;
      const m = ControlDownSchema.safeParse(parseJson(text));
      if (!m.success) return this.#o.log("warn", "invalid control message from pool");
      if (m.data.t === "welcome") {
        this.#welcomed = true;
        this.#backoff.reset();
        this.#o.log("info", "runner-host connected", { runner_id: this.#o.runnerId, pool: m.data.pool });
        this.#o.onWelcome?.();
        this.#o.onConnectionChange?.(true);
        this.statusChanged(); // anything that changed between hello and welcome
      } else {
        try {
          this.#o.onAttach(m.data);
        } catch (err) {
          this.#o.log("error", "attach order handler failed", { session: m.data.session, error: (err as Error).message });
        }
        this.#attaches++;
        this.statusChanged(true);
      }
    });
    ws.on("refused", (status: number, message: string) => {
      answered = true;
      this.#o.log("warn", "control socket refused", { status });
      this.#o.onRefused?.(status, message);
    });
    ws.on("error", (e) => {
      this.#o.log("debug", "control socket error", { error: e.message });
      if (!answered && !this.#stopped) {
        answered = true;
        this.#o.onUnreachable?.(e.message);
      }
    });
    ws.on("close", (code) => {
      stopKeepAlive();
      if (this.#welcomed) {
        this.#o.log("info", "control socket closed", { code });
        this.#o.onConnectionChange?.(false);
      }
      this.#welcomed = false;
      if (this.#stopped) return;
      this.#retry = setTimeout(() => this.#connect(), this.#backoff.next());
    });
  }
}

/** The part of a status the pool places by (src/runner/runner-pool.ts `roomFor`, `status`). */
function placementFigures(draining: boolean, c: Capacity): string {
  return `${draining} ${c.loaded} ${c.loaded_limit} ${c.loaded >= c.loaded_limit ? c.idle : "-"}`;
}
