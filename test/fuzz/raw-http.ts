/**
 * Sends one raw HTTP/1.1 request over a fresh TCP connection and reads only the status line and
 * headers: what a lying Content-Length or a never-ending SSE stream does to the body is not the
 * client's problem. `undefined` status: the server closed the connection without answering, or
 * did not answer in time.
 */
import net from "node:net";
import type { RawRequest } from "./requests.ts";

export type RawResponse = { status: number | undefined; head: string; ms: number };

export function sendRaw(host: string, port: number, r: RawRequest, timeoutMs: number): Promise<RawResponse> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let buf = Buffer.alloc(0);
    let settled = false;
    const done = (status: number | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const end = buf.indexOf("\r\n\r\n");
      resolve({ status, head: buf.subarray(0, end < 0 ? Math.min(buf.length, 2000) : end).toString("latin1"), ms: performance.now() - t0 });
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    socket.on("data", (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const m = /^HTTP\/1\.[01] (\d{3})/.exec(buf.toString("latin1", 0, 20));
        // An interim answer (100 Continue to `Expect`) is followed by the real one.
        if (m && m[1]!.startsWith("1")) {
          buf = buf.subarray(end + 4);
          continue;
        }
        return done(m ? Number(m[1]) : undefined);
      }
    });
    socket.on("error", () => done(undefined));
    socket.on("close", () => done(undefined));
    socket.on("connect", () => {
      const lines = [`${r.method} ${r.target} HTTP/1.1`, `Host: ${host}:${port}`, "Connection: close", ...r.headers.map(([k, v]) => `${k}: ${v}`)];
      socket.write(Buffer.from(`${lines.join("\r\n")}\r\n\r\n`, "utf8"));
      const chunked = r.headers.some(([k, v]) => k.toLowerCase() === "transfer-encoding" && v === "chunked");
      if (chunked) {
        if (r.body.length > 0) socket.write(Buffer.concat([Buffer.from(`${r.body.length.toString(16)}\r\n`), r.body, Buffer.from("\r\n")]));
        socket.write("0\r\n\r\n");
      } else if (r.body.length > 0) socket.write(r.body);
      // A Content-Length longer than the body: the server sees the end of the stream instead.
      socket.end();
    });
  });
}
