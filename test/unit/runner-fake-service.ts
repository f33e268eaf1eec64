/**
 * A fake of the service's side of the runner link (src/shared/runner-protocol.ts): one `ws`
 * server on 127.0.0.1:0 that plays RunnerPool on the control path and a SessionObject per session
 * on the link path. It validates every message the runner-host sends against the shared schemas,
 * applies numbered up messages once (counting duplicates), acks them (unless told not to), and
 * resends unacked down messages after a reconnect, as the real objects must.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import WebSocket, { WebSocketServer } from "ws";
import {
  CONTROL_PATH,
  ControlUpSchema,
  LINK_PATH,
  LinkUpSchema,
  PING,
  PONG,
  type ControlDown,
  type ControlUp,
  type LinkDown,
  type LinkUp,
} from "../../src/shared/runner-protocol.ts";
import { Waiter } from "./runner-waiter.ts";

export const RUNNER_SECRET = "test-runner-secret-0123456789abcdef";

type DownBody = LinkDown extends infer M ? (M extends { seq: number } ? Omit<M, "seq"> : never) : never;

export class FakeControl {
  readonly ws: WebSocket;
  readonly messages = new Waiter<ControlUp>();
  constructor(ws: WebSocket) {
    this.ws = ws;
  }
  send(m: ControlDown): void {
    this.ws.send(JSON.stringify(m));
  }
}

/** One SessionObject for one lease. */
export class FakeSession {
  readonly name: string;
  readonly lease: number;
  /** Applied numbered messages and live ones, in arrival order (no duplicates). */
  readonly ups = new Waiter<LinkUp>();
  /** Every hello, in order. */
  readonly hellos = new Waiter<Extract<LinkUp, { t: "hello" }>>();
  /** Socket openings and closes (close code). */
  readonly sockets = new Waiter<{ open: boolean; code?: number }>();
  /** Every `down` the runner-host acked, in order. */
  readonly acks = new Waiter<number>();
  duplicates = 0;
  /** Every `batch` frame received, in order: the seq of each numbered item, the `t` of the others. */
  readonly batches: (number | string)[][] = [];
  /** Deltas that arrived as a frame of their own (not inside a batch). */
  readonly soloDeltas = new Set<LinkUp>();
  /** performance.now() of the first delta of each turn. */
  readonly deltaTimes = new Map<string, number>();
  autoAck = true;
  appliedUp = 0;
  ackedDown = 0;
  ws: WebSocket | undefined;
  #downs: LinkDown[] = [];
  #nextDown = 1;
  readonly errors: string[] = [];

  constructor(name: string, lease: number) {
    this.name = name;
    this.lease = lease;
  }

  /** Numbers a down message and sends it (or keeps it until the runner-host reconnects). */
  send(body: DownBody): number {
    const m = { ...body, seq: this.#nextDown++ } as LinkDown;
    this.#downs.push(m);
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(m));
    return (m as { seq: number }).seq;
  }

  /** The seq of the last numbered down message sent. */
  get lastDown(): number {
    return this.#nextDown - 1;
  }

  /** Sends a message as is (a duplicate, a gap). */
  sendRaw(m: unknown): void {
    this.ws!.send(JSON.stringify(m));
  }

  ack(): void {
    this.ws?.send(JSON.stringify({ t: "ack", up: this.appliedUp } satisfies LinkDown));
  }

  /** Numbered messages of one turn, plus its live deltas, in order. */
  turn(turn: string): LinkUp[] {
    return this.ups.items.filter((m) => "turn" in m && m.turn === turn);
  }

  accept(ws: WebSocket): void {
    this.ws = ws;
    this.sockets.push({ open: true });
    ws.on("close", (code) => this.sockets.push({ open: false, code }));
    ws.on("message", (data) => {
      const text = data.toString();
      if (text === PING) return void ws.send(PONG);
      const parsed = LinkUpSchema.safeParse(JSON.parse(text));
      if (!parsed.success) return void this.errors.push(`invalid up message: ${text.slice(0, 200)}`);
      if (parsed.data.t === "delta") this.soloDeltas.add(parsed.data);
      this.#onUp(ws, parsed.data);
    });
  }

  #onUp(ws: WebSocket, m: LinkUp): void {
    if (m.t === "hello") {
      this.hellos.push(m);
      for (const d of this.#downs) if ((d as { seq: number }).seq > m.down) ws.send(JSON.stringify(d));
      if (this.autoAck) this.ack();
      return;
    }
    if (m.t === "ack") {
      this.ackedDown = Math.max(this.ackedDown, m.down);
      this.acks.push(m.down);
      this.#downs = this.#downs.filter((d) => (d as { seq: number }).seq > m.down);
      return;
    }
    if (m.t === "batch") {
      this.batches.push(m.msgs.map((x) => ("seq" in x ? x.seq : x.t)));
      for (const x of m.msgs) {
        if ("seq" in x) this.#applyUp(x);
        else this.#onUp(ws, x);
      }
      if (this.autoAck && m.msgs.some((x) => "seq" in x)) this.ack();
      return;
    }
    if (!("seq" in m)) {
      if (m.t === "delta" && !this.deltaTimes.has(m.turn)) this.deltaTimes.set(m.turn, performance.now());
      return void this.ups.push(m); // live-only
    }
    this.#applyUp(m);
    if (this.autoAck) this.ack();
  }

  #applyUp(m: Extract<LinkUp, { seq: number }>): void {
    if (m.seq <= this.appliedUp) return void this.duplicates++;
    if (m.seq !== this.appliedUp + 1) return void this.errors.push(`gap: expected ${this.appliedUp + 1}, got ${m.seq}`);
    this.appliedUp = m.seq;
    this.ups.push(m);
  }
}

export class FakeService {
  readonly url: string;
  readonly controls = new Waiter<FakeControl>();
  readonly sessions = new Map<string, FakeSession>();
  /** Link upgrades refused (wrong lease or secret, or `refuseLinks`). */
  readonly refused = new Waiter<string>();
  /** While set, link upgrades are answered with this HTTP status. */
  refuseLinks: number | undefined;
  readonly #server: Server;
  readonly #wss: WebSocketServer;

  private constructor(server: Server, wss: WebSocketServer) {
    this.#server = server;
    this.#wss = wss;
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  static async start(): Promise<FakeService> {
    const server = createServer((_req, res) => res.writeHead(404).end());
    const wss = new WebSocketServer({ noServer: true });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const svc = new FakeService(server, wss);
    server.on("upgrade", (req, socket, head) => svc.#upgrade(req, socket, head));
    return svc;
  }

  /** The control socket of the runner-host (after its hello). */
  async control(n = 0): Promise<FakeControl> {
    return this.controls.nth(n);
  }

  /** Orders an attach and returns the object that will receive the link. */
  async attach(name: string, opts: { lease?: number; harness?: string; control?: FakeControl } = {}): Promise<FakeSession> {
    const lease = opts.lease ?? 1;
    const fake = new FakeSession(name, lease);
    this.sessions.set(name, fake);
    const control = opts.control ?? (await this.control());
    control.send({ t: "attach", session: name, lease, harness: opts.harness ?? "ref" });
    return fake;
  }

  async close(): Promise<void> {
    for (const c of this.#wss.clients) c.terminate();
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  #upgrade(req: import("node:http").IncomingMessage, socket: import("node:stream").Duplex, head: Buffer): void {
    // Node's server takes its error listener off an upgraded socket: a runner-host that drops the
    // connection while a refusal is written would otherwise raise an uncaught ECONNRESET.
    socket.on("error", () => socket.destroy());
    const url = new URL(req.url ?? "/", "http://x");
    if (req.headers.authorization !== `Bearer ${RUNNER_SECRET}`) {
      this.refused.push(`secret on ${url.pathname}`);
      return void socket.end("HTTP/1.1 401 Unauthorized\r\n\r\n");
    }
    if (url.pathname === CONTROL_PATH) {
      return this.#wss.handleUpgrade(req, socket, head, (ws) => {
        const c = new FakeControl(ws);
        ws.on("message", (data) => {
          const text = data.toString();
          if (text === PING) return void ws.send(PONG);
          const m = ControlUpSchema.parse(JSON.parse(text));
          c.messages.push(m);
          if (m.t === "hello") {
            c.send({ t: "welcome", pool: "default" });
            this.controls.push(c);
          }
        });
      });
    }
    const fake = this.sessions.get(url.searchParams.get("session") ?? "");
    if (this.refuseLinks !== undefined && url.pathname === LINK_PATH) {
      this.refused.push(`link ${url.search} (told to refuse)`);
      return void socket.end(`HTTP/1.1 ${this.refuseLinks} Refused\r\n\r\n`);
    }
    if (url.pathname !== LINK_PATH || !fake || Number(url.searchParams.get("lease")) !== fake.lease) {
      this.refused.push(`link ${url.search}`);
      return void socket.end("HTTP/1.1 409 Conflict\r\n\r\n");
    }
    this.#wss.handleUpgrade(req, socket, head, (ws) => fake.accept(ws));
  }
}
