/**
 * A reverse proxy that serves a service under a path prefix, as an operator's proxy in front of
 * the Worker would, for WebSocket upgrades (what runner-hosts open): `<url><prefix>/x` reaches
 * the target as `/x`; anything else gets 404. `seen` lists the request paths as they arrived.
 */
import http from "node:http";
import net from "node:net";

export type PrefixProxy = { url: string; seen: string[]; close(): Promise<void> };

export async function startPrefixProxy(target: string, prefix: string): Promise<PrefixProxy> {
  const { hostname, port } = new URL(target);
  const seen: string[] = [];
  const strip = (path: string | undefined) => (path?.startsWith(`${prefix}/`) ? path.slice(prefix.length) : undefined);
  const sockets = new Set<net.Socket>();
  // Runner-hosts only open WebSockets here; a plain request is not proxied.
  const server = http.createServer((req, res) => {
    seen.push(req.url ?? "");
    res.writeHead(404).end();
  });
  server.on("connection", (s) => (sockets.add(s), s.on("close", () => sockets.delete(s))));
  server.on("upgrade", (req, client, head) => {
    seen.push(req.url ?? "");
    const path = strip(req.url);
    if (path === undefined) return void client.end("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    const upstream = net.connect(Number(port), hostname, () => {
      const headers = Object.entries(req.headers).flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((x) => `${k}: ${x}\r\n`));
      upstream.write(`${req.method} ${path} HTTP/1.1\r\n${headers.join("")}\r\n`);
      upstream.write(head);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    sockets.add(upstream);
    const drop = () => (client.destroy(), upstream.destroy(), sockets.delete(upstream));
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port: local } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${local}`,
    seen,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
