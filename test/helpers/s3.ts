/**
 * @20minutes/s3rver on loopback as the S3 peer: it checks SigV4 signatures (credentials
 * S3RVER/S3RVER). `stop()` drops the port and its open connections (an outage); `start()` brings
 * the same port and directory back. `onPut` fires when an object has been stored.
 */
import S3rver from "@20minutes/s3rver";
import { mkdtempSync } from "node:fs";
import type { Server } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { S3Store } from "../../src/persistence/s3-store.ts";

export const S3_KEY = "S3RVER";

export type S3Peer = {
  url: string;
  bucket: string;
  onPut(fn: (key: string) => void): void;
  /** Every key under `prefix` (the service's own S3 listing). */
  keys(prefix: string): Promise<string[]>;
  get(key: string): Promise<Buffer>;
  stop(): Promise<void>;
  start(): Promise<void>;
};

export async function startS3(): Promise<S3Peer> {
  const dir = mkdtempSync(path.join(tmpdir(), "s3rver-"));
  const bucket = "sess";
  const listeners: ((key: string) => void)[] = [];
  let server: S3rver & { httpServer: Server };
  let port = 0;
  const start = async () => {
    server = new S3rver({ address: "127.0.0.1", port, directory: dir, silent: true, configureBuckets: [{ name: bucket }] }) as typeof server;
    server.on("event", (e: { Records: { s3: { object: { key: string } } }[] }) => {
      for (const r of e.Records) for (const fn of listeners) fn(decodeURIComponent(r.s3.object.key));
    });
    port = (await server.run()).port;
  };
  await start();
  const url = `http://127.0.0.1:${port}`;
  const store = new S3Store({ kind: "s3", bucket, region: "us-east-1", endpoint: url, accessKeyId: S3_KEY, secretAccessKey: S3_KEY });
  return {
    url,
    bucket,
    onPut: (fn) => listeners.push(fn),
    keys: (prefix) => store.list(prefix),
    async get(key) {
      const bytes = await store.get(key);
      if (!bytes) throw new Error(`GET ${key}: no such object`);
      return Buffer.from(bytes);
    },
    async stop() {
      const closed = server.close();
      server.httpServer.closeAllConnections();
      await closed;
    },
    start,
  };
}
