/**
 * Starts the real `@modelcontextprotocol/server-everything` (Streamable HTTP) on a free port and
 * waits for its listening line (it writes that line to stderr; stdout logs every request).
 */
import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { ROOT } from "./stack.ts";

const EVERYTHING = path.join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
/** How long server-everything may take to listen, ms (about 0.7 s measured). */
const START_DEADLINE_MS = 15_000;

export type Everything = { url: string; stop(): Promise<void> };

/** A port nothing listens on (taken and released): on all interfaces, or on `host`. */
export async function freePort(host?: string): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, host, resolve));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

export async function startEverything(): Promise<Everything> {
  // It binds all interfaces (`app.listen(PORT)`), so the free port is taken from all interfaces too.
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [EVERYTHING, "streamableHttp"], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"],
  });
  await new Promise<void>((resolve, reject) => {
    let log = "";
    const timer = setTimeout(() => reject(new Error(`server-everything not listening after ${START_DEADLINE_MS} ms:\n${log}`)), START_DEADLINE_MS);
    child.stderr!.on("data", (chunk: Buffer) => {
      log += chunk.toString();
      if (/listening on port/.test(log)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server-everything exited with ${code}:\n${log}`));
    });
  });
  child.stderr!.resume();
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    async stop() {
      if (child.pid === undefined || child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    },
  };
}
