/**
 * RunnerPool: the runner-hosts connected to this deployment and where sessions are placed.
 * Each runner-host keeps one hibernatable control socket here; its hello and latest status
 * (harnesses, capacity, draining) live in the socket's attachment, so the pool keeps no memory
 * state and can hibernate between messages. Placement and waiting sessions are in SQLite.
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import { ControlUpSchema, PING, PONG, type Capacity, type ControlDown } from "../shared/runner-protocol.ts";
import { log } from "../log.ts";
import { migrate } from "../storage/migrate.ts";
import m0001 from "../../migrations/runner_pool/0001_init.sql";

const MIGRATIONS = [m0001];

type Host = { runnerId: string; boot: string; harnesses: string[]; draining: boolean; capacity: Capacity };

export type PoolStatus = { runners: number; ready: number; draining: boolean; harnesses: string[] };
export type Placement = "placed" | "waiting";

export class RunnerPool extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage, MIGRATIONS);
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING, PONG));
  }

  /** Accepts a control socket. The Worker has already checked the runner secret. */
  async fetch(request: Request): Promise<Response> {
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") return new Response(null, { status: 426 });
    const pair = new WebSocketPair();
    this.ctx.acceptWebSocket(pair[1], ["control"]);
    pair[1].serializeAttachment(null);
    return new Response(null, { status: 101, webSocket: pair[0] });
  }

  async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    let parsed;
    try {
      parsed = ControlUpSchema.safeParse(JSON.parse(typeof message === "string" ? message : new TextDecoder().decode(message)));
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success) return ws.close(1008, "invalid control message");
    const m = parsed.data;
    if (m.t === "hello") {
      ws.serializeAttachment({ runnerId: m.runner_id, boot: m.boot, harnesses: m.harnesses, draining: m.draining, capacity: m.capacity } satisfies Host);
      send(ws, { t: "welcome", pool: "default" });
      log("info", "runner-host registered", { runner_id: m.runner_id });
      await this.#forgetOldBoot(m.runner_id, m.boot);
    } else if (m.t === "status") {
      const h = ws.deserializeAttachment() as Host | null;
      if (!h) return ws.close(1008, "status before hello");
      ws.serializeAttachment({ ...h, draining: m.draining, capacity: m.capacity } satisfies Host);
    } else {
      // The runner-host could not take it after all: the session waits for the next chance.
      const sql = this.ctx.storage.sql;
      const a = sql.exec<{ lease: number; harness: string }>("SELECT lease, harness FROM assignments WHERE session = ?", m.session).toArray()[0];
      if (a?.lease === m.lease) {
        sql.exec("DELETE FROM assignments WHERE session = ?", m.session);
        const harness = a.harness;
        sql.exec(
          "INSERT INTO waiting (session, lease, harness, since) VALUES (?, ?, ?, ?) ON CONFLICT (session) DO UPDATE SET lease = excluded.lease",
          m.session,
          m.lease,
          harness,
          Date.now(),
        );
      }
      log("info", "attach refused", { reason: m.reason });
      return;
    }
    this.#placeWaiting();
  }

  async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    const h = ws.deserializeAttachment() as Host | null;
    if (h) log("info", "runner-host disconnected", { runner_id: h.runnerId, code });
  }

  status(): PoolStatus {
    const hosts = this.#hosts();
    const ready = hosts.filter((h) => !h.host.draining);
    return {
      runners: hosts.length,
      ready: ready.length,
      draining: hosts.length > 0 && ready.length === 0,
      harnesses: [...new Set(ready.flatMap((h) => h.host.harnesses))].sort(),
    };
  }

  /** False only when runner-hosts serve this harness and every one is full with nothing idle. */
  canPlace(harness: string): boolean {
    const c = this.#hosts().filter((h) => !h.host.draining && h.host.harnesses.includes(harness));
    return c.length === 0 || c.some((h) => roomFor(h.host));
  }

  /** Sends an attach order to the best runner-host, or parks the session until one can take it. */
  place(session: string, lease: number, harness: string): Placement {
    const sql = this.ctx.storage.sql;
    if (this.#attach(session, lease, harness)) return "placed";
    sql.exec(
      "INSERT INTO waiting (session, lease, harness, since) VALUES (?, ?, ?, ?) ON CONFLICT (session) DO UPDATE SET lease = excluded.lease",
      session,
      lease,
      harness,
      Date.now(),
    );
    return "waiting";
  }

  #attach(session: string, lease: number, harness: string): boolean {
    const best = this.#hosts()
      .filter((h) => !h.host.draining && h.host.harnesses.includes(harness) && roomFor(h.host))
      .sort((a, b) => a.host.capacity.loaded - b.host.capacity.loaded)[0];
    if (!best) return false;
    send(best.ws, { t: "attach", session, lease, harness });
    // Count it now; the runner-host's next status replaces the estimate.
    const loaded = best.host.capacity.loaded + 1;
    best.ws.serializeAttachment({ ...best.host, capacity: { ...best.host.capacity, loaded } } satisfies Host);
    const sql = this.ctx.storage.sql;
    sql.exec("DELETE FROM waiting WHERE session = ?", session);
    sql.exec(
      "INSERT INTO assignments (session, runner_id, boot, lease, harness) VALUES (?, ?, ?, ?, ?) ON CONFLICT (session) DO UPDATE SET runner_id = excluded.runner_id, boot = excluded.boot, lease = excluded.lease",
      session,
      best.host.runnerId,
      best.host.boot,
      lease,
      harness,
    );
    return true;
  }

  #placeWaiting(): void {
    const waiting = this.ctx.storage.sql
      .exec<{ session: string; lease: number; harness: string }>("SELECT session, lease, harness FROM waiting ORDER BY since")
      .toArray();
    for (const w of waiting) this.#attach(w.session, w.lease, w.harness);
  }

  /** A runner-host came back with a new boot: the sessions it held are gone. */
  async #forgetOldBoot(runnerId: string, boot: string): Promise<void> {
    const sql = this.ctx.storage.sql;
    const lost = sql
      .exec<{ session: string; lease: number }>("SELECT session, lease FROM assignments WHERE runner_id = ? AND boot <> ?", runnerId, boot)
      .toArray();
    sql.exec("DELETE FROM assignments WHERE runner_id = ? AND boot <> ?", runnerId, boot);
    sql.exec("INSERT INTO boots (runner_id, boot) VALUES (?, ?) ON CONFLICT (runner_id) DO UPDATE SET boot = excluded.boot", runnerId, boot);
    for (const l of lost) {
      try {
        await this.env.SESSIONS.getByName(l.session).runnerGone(l.lease);
      } catch (e) {
        log("warn", "could not tell a session its runner-host restarted", { error: String(e) });
      }
    }
  }

  #hosts(): { ws: WebSocket; host: Host }[] {
    return this.ctx
      .getWebSockets("control")
      .filter((ws) => ws.readyState === WebSocket.OPEN)
      .map((ws) => ({ ws, host: ws.deserializeAttachment() as Host | null }))
      .filter((h): h is { ws: WebSocket; host: Host } => h.host !== null);
  }
}

function roomFor(h: Host): boolean {
  return h.capacity.loaded < h.capacity.loaded_limit || h.capacity.idle > 0;
}

function send(ws: WebSocket, m: ControlDown): void {
  ws.send(JSON.stringify(m));
}
