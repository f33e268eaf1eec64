/**
 * RunnerPool: the runner-hosts connected to this deployment. Each runner-host keeps one
 * hibernatable control socket here; its hello (harnesses, draining) lives in the socket's
 * attachment, so the pool holds no memory state and can hibernate between messages.
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import { ControlUpSchema, PING, PONG, type ControlDown } from "../shared/runner-protocol.ts";
import { log } from "../log.ts";

type Attachment = { runnerId: string; harnesses: string[]; draining: boolean } | null;

export type PoolStatus = { runners: number; ready: number; harnesses: string[] };

export class RunnerPool extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING, PONG));
  }

  /** Accepts a control socket. The Worker has already checked the runner secret. */
  async fetch(request: Request): Promise<Response> {
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") {
      return new Response("expected a WebSocket upgrade", { status: 426 });
    }
    const pair = new WebSocketPair();
    const server = pair[1];
    this.ctx.acceptWebSocket(server, ["control"]);
    server.serializeAttachment(null satisfies Attachment);
    return new Response(null, { status: 101, webSocket: pair[0] });
  }

  async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    let parsed;
    try {
      parsed = ControlUpSchema.safeParse(JSON.parse(typeof message === "string" ? message : new TextDecoder().decode(message)));
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success) {
      ws.close(1008, "invalid control message");
      return;
    }
    const m = parsed.data;
    if (m.type === "hello") {
      ws.serializeAttachment({ runnerId: m.runner_id, harnesses: m.harnesses, draining: m.draining } satisfies Attachment);
      send(ws, { type: "welcome", pool: "default" });
      log("info", "runner-host registered", { runner_id: m.runner_id });
    } else {
      const a = ws.deserializeAttachment() as Attachment;
      if (a) ws.serializeAttachment({ ...a, draining: true } satisfies Attachment);
    }
  }

  async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    const a = ws.deserializeAttachment() as Attachment;
    if (a) log("info", "runner-host disconnected", { runner_id: a.runnerId, code });
  }

  status(): PoolStatus {
    const hosts = this.ctx
      .getWebSockets("control")
      .filter((ws) => ws.readyState === WebSocket.OPEN)
      .map((ws) => ws.deserializeAttachment() as Attachment)
      .filter((a): a is NonNullable<Attachment> => a !== null);
    const ready = hosts.filter((h) => !h.draining);
    return {
      runners: hosts.length,
      ready: ready.length,
      harnesses: [...new Set(ready.flatMap((h) => h.harnesses))].sort(),
    };
  }
}

function send(ws: WebSocket, m: ControlDown): void {
  ws.send(JSON.stringify(m));
}
