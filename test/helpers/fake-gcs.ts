/**
 * A small fake of the Cloud Storage JSON API on loopback (no GCS emulator is installable here).
 * Its behaviour is checked against the official `@google-cloud/storage` client
 * (test/unit/persistence-stores.test.ts), and it serves what the service's GCS provider uses:
 *
 * - `POST /token`: the OAuth JWT-bearer grant; the assertion's RS256 signature is verified with the
 *   service account's public key, and a fresh access token is returned.
 * - `POST /upload/storage/v1/b/{b}/o?uploadType=media|multipart&name=…[&ifGenerationMatch=0]`
 * - `GET /storage/v1/b/{b}/o/{name}?alt=media`, `DELETE /storage/v1/b/{b}/o/{name}`,
 *   `GET /storage/v1/b/{b}/o?prefix=…[&maxResults=…&pageToken=…]` (also without `/storage/v1`, as
 *   the client sends in emulator mode).
 *
 * With `publicKey` set, object requests must carry a bearer token this fake issued (401 otherwise).
 * `stop()`/`start()` take the port down and up again (an outage) without losing objects.
 * `holdUploads()` keeps every upload waiting, unanswered, until the `release()` it returns;
 * `held` resolves once one is waiting (a request caught in the middle of its upload round).
 */
import { createHash, createVerify, randomBytes, type KeyObject } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type FakeGcs = {
  url: string;
  objects: Map<string, Buffer>;
  /** Requests seen: method, path and whether a valid bearer token came with it. */
  log: { method: string; path: string; authorized: boolean }[];
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
  holdUploads(): { held: Promise<void>; release(): void };
};

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC32C (Castagnoli), base64 of the big-endian value: what GCS reports and the client checks. */
function crc32c(b: Buffer): string {
  let c = 0xffffffff;
  for (const x of b) c = CRC_TABLE[(c ^ x) & 0xff]! ^ (c >>> 8);
  const out = Buffer.alloc(4);
  out.writeUInt32BE((c ^ 0xffffffff) >>> 0);
  return out.toString("base64");
}

export async function startFakeGcs(o: { bucket: string; publicKey?: KeyObject; port?: number }): Promise<FakeGcs> {
  const objects = new Map<string, Buffer>();
  const tokens = new Set<string>();
  const log: FakeGcs["log"] = [];
  let generation = 1;

  const meta = (name: string, body: Buffer) => ({
    kind: "storage#object",
    name,
    bucket: o.bucket,
    generation: String(generation++),
    size: String(body.byteLength),
    md5Hash: createHash("md5").update(body).digest("base64"),
    crc32c: crc32c(body),
  });
  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(body));
  };
  const error = (res: ServerResponse, status: number, message: string) => json(res, status, { error: { code: status, message } });

  let gate: { open: Promise<void>; arrived(): void } | undefined;
  const holdUploads = () => {
    let arrived!: () => void;
    let release!: () => void;
    const held = new Promise<void>((r) => (arrived = r));
    const open = new Promise<void>((r) => (release = r));
    gate = { open, arrived };
    return {
      held,
      release: () => {
        gate = undefined;
        release();
      },
    };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const url = new URL(req.url!, "http://fake");
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
    const authorized = bearer !== undefined && tokens.has(bearer);
    log.push({ method: req.method!, path: url.pathname, authorized });

    if (url.pathname === "/token" && req.method === "POST") {
      const assertion = new URLSearchParams(body.toString()).get("assertion") ?? "";
      const [h, p, sig] = assertion.split(".");
      const ok =
        o.publicKey !== undefined &&
        sig !== undefined &&
        createVerify("RSA-SHA256").update(`${h}.${p}`).verify(o.publicKey, Buffer.from(sig, "base64url"));
      if (!ok) return error(res, 400, "invalid_grant");
      const token = randomBytes(16).toString("hex");
      tokens.add(token);
      return json(res, 200, { access_token: token, expires_in: 3600, token_type: "Bearer" });
    }
    if (o.publicKey && !authorized) return error(res, 401, "Invalid Credentials");

    const path = url.pathname.replace(/^\/storage\/v1(?=\/b\/)/, "");
    const upload = /^\/upload\/storage\/v1\/b\/([^/]+)\/o$/.exec(url.pathname);
    if (upload && req.method === "POST") {
      if (gate) {
        gate.arrived();
        await gate.open;
      }
      if (decodeURIComponent(upload[1]!) !== o.bucket) return error(res, 404, "bucket not found");
      let name = url.searchParams.get("name");
      let data = body;
      if (url.searchParams.get("uploadType") === "multipart") {
        const boundary = /boundary="?([^";]+)"?/.exec(req.headers["content-type"] ?? "")?.[1];
        const parts = body.toString("latin1").split(`--${boundary}`).slice(1, -1);
        const split = (part: string) => part.slice(part.indexOf("\r\n\r\n") + 4, -2);
        name ??= (JSON.parse(Buffer.from(split(parts[0]!), "latin1").toString("utf8")) as { name: string }).name;
        data = Buffer.from(split(parts[1]!), "latin1");
      }
      if (!name) return error(res, 400, "name is required");
      if (url.searchParams.get("ifGenerationMatch") === "0" && objects.has(name)) return error(res, 412, "Precondition Failed");
      objects.set(name, data);
      return json(res, 200, meta(name, data));
    }
    const list = /^\/b\/([^/]+)\/o$/.exec(path);
    if (list && req.method === "GET") {
      // Names in byte order, `maxResults` at a time; the page token is the last name given.
      const prefix = url.searchParams.get("prefix") ?? "";
      const after = Buffer.from(url.searchParams.get("pageToken") ?? "", "base64url").toString("utf8");
      const max = Number(url.searchParams.get("maxResults") ?? 1000);
      const names = [...objects.keys()].filter((k) => k.startsWith(prefix) && k > after).sort((a, b) => (a < b ? -1 : 1));
      const items = names.slice(0, max).map((k) => meta(k, objects.get(k)!));
      const more = names.length > max ? { nextPageToken: Buffer.from(names[max - 1]!, "utf8").toString("base64url") } : {};
      return json(res, 200, { kind: "storage#objects", items, ...more });
    }
    const object = /^\/b\/([^/]+)\/o\/(.+)$/.exec(path);
    if (object) {
      const name = decodeURIComponent(object[2]!);
      const data = objects.get(name);
      if (req.method === "DELETE") {
        if (!data) return error(res, 404, "No such object");
        objects.delete(name);
        return void res.writeHead(204).end();
      }
      if (req.method === "GET") {
        if (!data) return error(res, 404, "No such object");
        if (url.searchParams.get("alt") === "media") {
          return void res.writeHead(200, { "Content-Type": "application/octet-stream", "x-goog-hash": `crc32c=${crc32c(data)},md5=${createHash("md5").update(data).digest("base64")}` }).end(data);
        }
        return json(res, 200, meta(name, data));
      }
    }
    return error(res, 404, "no such route");
  };

  let server: Server;
  let port = o.port ?? 0;
  const start = async () => {
    server = createServer((req, res) => void handle(req, res).catch((e) => error(res, 500, String(e))));
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  };
  const stop = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  await start();
  return { url: `http://127.0.0.1:${port}`, objects, log, start, stop, close: stop, holdUploads };
}
