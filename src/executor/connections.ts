/**
 * The sockets of one executor. Both kinds are hibernatable WebSockets accepted by the object, so an
 * idle connected executor lets its object sleep:
 * - `sse`: the Worker's relay for one `GET /commands` stream (the Worker writes the SSE frames);
 * - `rpc`: the executor's own `GET /rpc` WebSocket.
 * Each socket's attachment names its connection identity. Only the executor row's current
 * connection is live; a newer connect closes the older sockets.
 */
import type { Command } from "../shared/executor-protocol.ts";

export type Kind = "sse" | "rpc";
type Attachment = { connection: string; kind: Kind };

/** Close code for a connection replaced by a newer one, or ended by close. */
export const REPLACED = 4000;

export class Connections {
  readonly #ctx: DurableObjectState;

  constructor(ctx: DurableObjectState) {
    this.#ctx = ctx;
  }

  /** Accepts a new socket for `connection` and sends it `ready`; `headers` go on the 101. */
  accept(connection: string, kind: Kind, headers?: HeadersInit): Response {
    const pair = new WebSocketPair();
    const server = pair[1];
    this.#ctx.acceptWebSocket(server, [kind]);
    server.serializeAttachment({ connection, kind } satisfies Attachment);
    server.send(JSON.stringify({ type: "ready", connection } satisfies Command));
    return new Response(null, { status: 101, webSocket: pair[0], headers });
  }

  of(ws: WebSocket): Attachment | undefined {
    try {
      return ws.deserializeAttachment() as Attachment;
    } catch {
      return undefined;
    }
  }

  /** The open socket of `connection`, if it is still there (after a restart it is not). */
  socket(connection: string | null): WebSocket | undefined {
    if (connection === null) return undefined;
    return this.#ctx.getWebSockets().find((ws) => ws.readyState === WebSocket.OPEN && this.of(ws)?.connection === connection);
  }

  /** Sends a command to `connection`; false when it has no open socket. */
  send(connection: string | null, command: Command): boolean {
    const ws = this.socket(connection);
    if (!ws) return false;
    try {
      ws.send(JSON.stringify(command));
      return true;
    } catch {
      return false;
    }
  }

  /** Closes every socket except those of `keep`. */
  closeOthers(keep: string | undefined, reason: string): void {
    for (const ws of this.#ctx.getWebSockets()) {
      if (keep !== undefined && this.of(ws)?.connection === keep) continue;
      try {
        ws.close(REPLACED, reason);
      } catch {
        // Already closing.
      }
    }
  }
}
