/**
 * The service's outside world during a chaos run, all on loopback: the scripted provider behind a
 * proxy that can turn into a 5xx storm, and a tool server whose `echo` answers after the delay a
 * call asks for (so a fault can land while a tool call is in flight).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { startScriptedProvider, type ScriptedProvider } from "../examples/scripted-provider.ts";

/** Statuses a storm answers with, in turn: the provider failures a real one gives. */
const STORM_STATUSES = [500, 502, 503] as const;

export type Peers = {
  /** Base URL for the provider's `base_url` (ends in `/v1`). */
  providerUrl: string;
  /** URL of the `echo` tool. */
  toolUrl: string;
  /** Starts a storm: in-flight provider streams are cut and new requests get a 5xx until `calm`. */
  storm(): void;
  calm(): void;
  stormed: number;
  close(): Promise<void>;
};

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export async function startPeers(): Promise<Peers> {
  const provider: ScriptedProvider = await startScriptedProvider();
  const upstream = new URL(provider.url);
  let storming = false;
  let stormed = 0;
  const inFlight = new Set<http.ServerResponse>();

  const proxy = http.createServer((req, res) => {
    if (storming) return answer5xx(res, STORM_STATUSES[stormed++ % STORM_STATUSES.length]!);
    inFlight.add(res);
    res.once("close", () => inFlight.delete(res));
    const out = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    out.on("error", () => res.destroy());
    res.once("close", () => out.destroy());
    req.pipe(out);
  });

  const tools = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || "{}") as { arguments?: { ms?: number } };
      const ms = Math.min(Number(body.arguments?.ms ?? 0), 5_000);
      const t = setTimeout(() => {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ content: [{ type: "text", text: `echo ${JSON.stringify(body.arguments ?? null)}` }] }));
      }, ms);
      res.once("close", () => clearTimeout(t));
    });
  });

  const [proxyBase, toolBase] = await Promise.all([listen(proxy), listen(tools)]);
  return {
    providerUrl: `${proxyBase}/v1`,
    toolUrl: `${toolBase}/echo`,
    storm() {
      storming = true;
      for (const res of inFlight) res.destroy();
    },
    calm() {
      storming = false;
    },
    get stormed() {
      return stormed;
    },
    async close() {
      for (const s of [proxy, tools]) s.closeAllConnections();
      await Promise.all([provider.close(), ...[proxy, tools].map((s) => new Promise((r) => s.close(r)))]);
    },
  };
}

function answer5xx(res: http.ServerResponse, status: number): void {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify({ error: { message: "chaos: provider storm", type: "server_error", param: null, code: null } }));
}
