/**
 * RunnerPool: the runner-hosts of one region and where sessions are placed among them (one object
 * per region, named by pool-name.ts). Each runner-host keeps one hibernatable control socket here;
 * its hello and latest status (harnesses, capacity, draining) live in the socket's attachment, so
 * the pool keeps no memory state and can hibernate between messages. Placement and waiting
 * sessions are in SQLite. When the last runner-host serving a harness leaves, the sessions waiting
 * for that harness are handed back to their objects, which place them in another region.
 *
 * Storage layout (migrations/runner_pool): `assignments`, the runner-host and boot each session was
 * last placed on (a runner-host back with a new boot lost its sessions, which are told); `waiting`,
 * sessions with work and no room yet, oldest first; `boots`, the last boot seen per runner id.
 * Lifecycle: a row of `waiting` goes when the session is placed, withdraws or is handed back.
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import { ControlUpSchema, PING, PONG, SILENCE_CHECK_MS, SILENT_AFTER_MS, type Capacity, type ControlDown } from "../shared/runner-protocol.ts";
import { log } from "../log.ts";
import { answerClose } from "../http/close-reply.ts";
import { getRuntime } from "../runtime.ts";
import { migrate } from "../storage/migrate.ts";
import m0001 from "../../migrations/runner_pool/0001_init.sql";

const MIGRATIONS = [m0001];

/**
 * `seen`: when its last message arrived (ms since epoch); its pings are answered without one.
 * `sent`: attach orders sent on this socket; `handled`: how many of them its latest status had
 * counted. Placement reads the capacity with the difference counted ahead (`ahead`), so a status
 * sent before some orders arrived does not free their room again.
 */
type Host = { runnerId: string; boot: string; harnesses: string[]; draining: boolean; capacity: Capacity; seen?: number; sent: number; handled: number };

export type PoolStatus = {
  runners: number;
  ready: number;
  draining: boolean;
  harnesses: string[];
  /** Sessions the ready runner-hosts can still take before dropping idle ones. */
  free: number;
};
/**
 * `none`: no runner-host here serves the harness (the session was not parked, unless asked to);
 * `full`: every one that does is at `limits.loaded` with nothing idle (a claim is not parked).
 */
export type Placement = "placed" | "waiting" | "none" | "full";
/**
 * How a pool that cannot attach the session now answers: `park` keeps it waiting for room in any
 * case; `spill` answers `none` (keeping nothing) when no runner-host here serves the harness and
 * parks it otherwise; `claim` also keeps nothing when they are all full (`full`), so a message
 * that needs the session placed is refused and its room check and attach are one step here.
 */
export type PlaceMode = "park" | "spill" | "claim";
/** Whether this pool could take a session of a harness now. */
export type Room = "room" | "full" | "none";

/** Header the Worker forwards a control socket with: the region the runner-host announced. */
export const REGION_HEADER = "X-Svc-Region";

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
    // The region is kept on the socket (tags survive hibernation) for the welcome message.
    this.ctx.acceptWebSocket(pair[1], ["control", `region:${request.headers.get(REGION_HEADER) ?? "default"}`]);
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
      ws.serializeAttachment({ runnerId: m.runner_id, boot: m.boot, harnesses: m.harnesses, draining: m.draining, capacity: m.capacity, seen: Date.now(), sent: 0, handled: 0 } satisfies Host);
      await this.#watchSilence();
      const region = this.ctx.getTags(ws).find((t) => t.startsWith("region:"))?.slice("region:".length) ?? "default";
      send(ws, { t: "welcome", pool: region });
      log("info", "runner-host registered", { runner_id: m.runner_id });
      await this.#forgetOldBoot(m.runner_id, m.boot);
      await this.#handBackUnconfigured();
    } else if (m.t === "status") {
      const h = ws.deserializeAttachment() as Host | null;
      if (!h) return ws.close(1008, "status before hello");
      ws.serializeAttachment({ ...h, draining: m.draining, capacity: m.capacity, seen: Date.now(), handled: m.attaches } satisfies Host);
      await this.#watchSilence();
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
    answerClose(ws, code);
    const h = ws.deserializeAttachment() as Host | null;
    if (!h) return;
    log("info", "runner-host disconnected", { runner_id: h.runnerId, code });
    await this.#handBackOrphans();
  }

  /**
   * While a runner-host holds sessions: one that sent nothing and answered no ping for
   * SILENT_AFTER_MS is dropped, and the sessions placed on it are told their runner-host is lost
   * (a running turn fails, a later one is placed again). If it thaws, it dials in again; the
   * sessions' old leases are refused. With no sessions held the pool has no alarm (an idle
   * deployment wakes nothing); a silent runner-host is then only left out of placement and
   * readiness (`#hosts`), which needs no timer.
   */
  async alarm(): Promise<void> {
    for (const { ws, host } of this.#hosts(true)) {
      if (!silent(this.ctx, ws, host)) continue;
      log("warn", "runner-host silent: dropped", { runner_id: host.runnerId });
      ws.close(1011, "no ping answered within the silence bound");
      await this.#forget("runner_id = ? AND boot = ?", host.runnerId, host.boot);
    }
    await this.#handBackOrphans();
    await this.#watchSilence(true);
  }

  /** Arms the silence check while some runner-host holds sessions (`rearm`: from the alarm itself). */
  async #watchSilence(rearm = false): Promise<void> {
    if (!this.#hosts().some((h) => ahead(h.host).loaded > 0)) return;
    if (rearm || (await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + SILENCE_CHECK_MS);
  }

  status(): PoolStatus {
    const hosts = this.#hosts();
    const ready = hosts.filter((h) => !h.host.draining);
    return {
      runners: hosts.length,
      ready: ready.length,
      draining: hosts.length > 0 && ready.length === 0,
      harnesses: [...new Set(ready.flatMap((h) => h.host.harnesses))].sort(),
      free: ready.reduce((n, h) => n + Math.max(0, h.host.capacity.loaded_limit - ahead(h.host).loaded), 0),
    };
  }

  room(harness: string): Room {
    const c = this.#hosts().filter((h) => !h.host.draining && h.host.harnesses.includes(harness));
    if (c.length === 0) return "none";
    return c.some((h) => roomFor(h.host)) ? "room" : "full";
  }

  /**
   * Sends an attach order to the best runner-host, or (`mode`) parks the session until one can
   * take it. `none` keeps nothing, so the session can try another region first.
   */
  place(session: string, lease: number, harness: string, mode: PlaceMode = "park"): Placement {
    const sql = this.ctx.storage.sql;
    if (this.#attach(session, lease, harness)) return "placed";
    const room = mode === "park" ? "full" : this.room(harness);
    if (room === "none") return "none";
    if (mode === "claim") return "full";
    sql.exec(
      "INSERT INTO waiting (session, lease, harness, since) VALUES (?, ?, ?, ?) ON CONFLICT (session) DO UPDATE SET lease = excluded.lease",
      session,
      lease,
      harness,
      Date.now(),
    );
    return "waiting";
  }

  /**
   * The session no longer wants the placement it waits for (it was closed): no runner-host is given
   * it later, so a closed session never takes a `limits.loaded` slot when room comes.
   */
  withdraw(session: string, lease: number): void {
    this.ctx.storage.sql.exec("DELETE FROM waiting WHERE session = ? AND lease <= ?", session, lease);
  }

  #attach(session: string, lease: number, harness: string): boolean {
    const best = this.#hosts()
      .filter((h) => !h.host.draining && h.host.harnesses.includes(harness) && roomFor(h.host))
      .sort((a, b) => ahead(a.host).loaded - ahead(b.host).loaded)[0];
    if (!best) return false;
    send(best.ws, { t: "attach", session, lease, harness });
    best.ws.serializeAttachment({ ...best.host, sent: best.host.sent + 1 } satisfies Host);
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

  /**
   * The local stack is shutting down whole: every session waiting here for room ends its queued
   * input (docs/api.md "Turns": shutdown interrupts queued input). Returns how many.
   */
  async endWaiting(reason: string): Promise<number> {
    const sql = this.ctx.storage.sql;
    const waiting = sql.exec<{ session: string; lease: number }>("SELECT session, lease FROM waiting ORDER BY since").toArray();
    sql.exec("DELETE FROM waiting");
    await Promise.all(
      waiting.map(async (w) => {
        try {
          await this.env.SESSIONS.getByName(w.session).shutdownWaiting(w.lease, reason);
        } catch (e) {
          log("warn", "could not interrupt a waiting session", { error: String(e) });
        }
      }),
    );
    return waiting.length;
  }

  /**
   * After a runner-host left: sessions waiting for a harness no runner-host here serves any more go
   * back to their objects (as if their runner-host was lost), which place them in another region.
   */
  async #handBackOrphans(): Promise<void> {
    const served = new Set(this.#hosts().flatMap((h) => h.host.harnesses));
    await this.#handBack((harness) => !served.has(harness));
  }

  /**
   * After a deploy (a runner-host says hello): sessions waiting for a harness the configuration no
   * longer has go back to their objects, which fail their input (it could never run) instead of
   * leaving it queued for good.
   */
  async #handBackUnconfigured(): Promise<void> {
    const { harnesses } = (await getRuntime(this.env)).config;
    await this.#handBack((harness) => !Object.hasOwn(harnesses, harness));
  }

  async #handBack(which: (harness: string) => boolean): Promise<void> {
    const sql = this.ctx.storage.sql;
    const orphans = sql
      .exec<{ session: string; lease: number; harness: string }>("SELECT session, lease, harness FROM waiting ORDER BY since")
      .toArray()
      .filter((w) => which(w.harness));
    for (const o of orphans) {
      sql.exec("DELETE FROM waiting WHERE session = ?", o.session);
      try {
        await this.env.SESSIONS.getByName(o.session).runnerGone(o.lease);
      } catch (e) {
        log("warn", "could not hand a waiting session back", { error: String(e) });
      }
    }
  }

  /** A runner-host came back with a new boot: the sessions it held are gone. */
  async #forgetOldBoot(runnerId: string, boot: string): Promise<void> {
    this.ctx.storage.sql.exec("INSERT INTO boots (runner_id, boot) VALUES (?, ?) ON CONFLICT (runner_id) DO UPDATE SET boot = excluded.boot", runnerId, boot);
    await this.#forget("runner_id = ? AND boot <> ?", runnerId, boot);
  }

  /** Drops the placements matching `where` and tells their sessions the runner-host is gone. */
  async #forget(where: string, ...params: string[]): Promise<void> {
    const sql = this.ctx.storage.sql;
    const placed = sql.exec<{ session: string; lease: number }>(`SELECT session, lease FROM assignments WHERE ${where}`, ...params).toArray();
    sql.exec(`DELETE FROM assignments WHERE ${where}`, ...params);
    for (const l of placed) {
      try {
        await this.env.SESSIONS.getByName(l.session).runnerGone(l.lease);
      } catch (e) {
        log("warn", "could not tell a session its runner-host is gone", { error: String(e) });
      }
    }
  }

  /** Connected runner-hosts that said hello; without `withSilent`, not those gone silent. */
  #hosts(withSilent = false): { ws: WebSocket; host: Host }[] {
    return this.ctx
      .getWebSockets("control")
      .filter((ws) => ws.readyState === WebSocket.OPEN)
      .map((ws) => ({ ws, host: ws.deserializeAttachment() as Host | null }))
      .filter((h): h is { ws: WebSocket; host: Host } => h.host !== null && (withSilent || !silent(this.ctx, h.ws, h.host)));
  }
}

/** Nothing from it and no ping answered for SILENT_AFTER_MS (a socket whose state has no `seen` counts from its first ping answered). */
function silent(ctx: DurableObjectState, ws: WebSocket, host: Host): boolean {
  const last = Math.max(ctx.getWebSocketAutoResponseTimestamp(ws)?.getTime() ?? 0, host.seen ?? 0);
  return last > 0 && Date.now() - last > SILENT_AFTER_MS;
}

function roomFor(h: Host): boolean {
  const c = ahead(h);
  return c.loaded < c.loaded_limit || c.idle > 0;
}

/**
 * The runner-host's capacity as of its latest status, with the attach orders sent since that
 * status counted: each takes a free slot, or past the limit an idle session it drops for it.
 */
function ahead(h: Host): Capacity {
  const c = h.capacity;
  const pending = Math.max(0, h.sent - h.handled);
  const fill = Math.min(pending, Math.max(0, c.loaded_limit - c.loaded));
  return { loaded: c.loaded + fill, loaded_limit: c.loaded_limit, idle: Math.max(0, c.idle - (pending - fill)) };
}

function send(ws: WebSocket, m: ControlDown): void {
  ws.send(JSON.stringify(m));
}
