/**
 * A TCP proxy in front of a server that a test can cut: `cut()` destroys every connection open
 * through it (a dropped network path), while new connections keep working. `stall(true)`: new
 * connections are accepted and read but never answered (a peer that hangs) until `stall(false)`;
 * the stalled ones stay open and silent.
 */
import net from "node:net";

export type Proxy = { url: string; cut(): number; stall(on: boolean): void; close(): Promise<void> };

export async function startProxy(target: string): Promise<Proxy> {
  const { hostname, port } = new URL(target);
  const pairs = new Set<[net.Socket, net.Socket]>();
  const silent = new Set<net.Socket>();
  let stalled = false;
  const server = net.createServer((client) => {
    if (stalled) {
      silent.add(client);
      client.on("error", () => {}).on("close", () => silent.delete(client)).resume();
      return;
    }
    const upstream = net.connect(Number(port), hostname);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port: local } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${local}`,
    cut() {
      const n = pairs.size;
      for (const [a, b] of [...pairs]) (a.destroy(), b.destroy());
      pairs.clear();
      return n;
    },
    stall(on) {
      stalled = on;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const [a, b] of pairs) (a.destroy(), b.destroy());
        for (const c of silent) c.destroy();
        server.close(() => resolve());
      }),
  };
}
