/**
 * The runner-host's socket keepalive (runner-host/socket.ts): pings while the peer answers; a peer
 * silent past the bound (a partition that leaves the connection open) is reported (`onSilent`:
 * the session link then gives its lease up at once, runner-host/link.ts) and the socket ended.
 */
import { WebSocket, WebSocketServer } from "ws";
import { afterEach, describe, expect, it } from "vitest";
import { keepAlive } from "../../runner-host/socket.ts";
import { PING, PONG } from "../../src/shared/runner-protocol.ts";

let server: WebSocketServer | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A peer that answers pings `answering` times, then goes silent without closing. */
async function peer(answering: number): Promise<{ url: string; pings: () => number }> {
  let pings = 0;
  server = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  server.on("connection", (ws) =>
    ws.on("message", (m) => {
      if (m.toString() !== PING) return;
      pings += 1;
      if (pings <= answering) ws.send(PONG);
    }),
  );
  await new Promise<void>((resolve) => server!.once("listening", () => resolve()));
  const { port } = server.address() as { port: number };
  return { url: `ws://127.0.0.1:${port}`, pings: () => pings };
}

describe("socket keepalive", () => {
  it("a peer that stops answering without closing is reported silent and the socket is ended; one that answers is not", async () => {
    const p = await peer(3);
    const ws = new WebSocket(p.url);
    await new Promise((resolve) => ws.once("open", resolve));
    const silent = new Promise<number>((resolve) => keepAlive(ws, () => resolve(p.pings()), { pingMs: 20, silentMs: 100 }));
    const closed = new Promise((resolve) => ws.once("close", resolve));
    // Reported only after the answered pings stopped: never while the peer still answered.
    expect(await silent).toBeGreaterThan(3);
    await closed;
  });
});
