/**
 * The persistence providers against real peers, through the same store code the Worker runs:
 * `s3` and `r2` (S3 API) against @20minutes/s3rver, which checks SigV4 signatures; `gcs` against
 * the fake JSON-API server, itself checked with the official @google-cloud/storage client;
 * `filesystem` through the local stack's file service, files read back from disk.
 */
import S3rver from "@20minutes/s3rver";
import { generateKeyPairSync } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FsStore } from "../../src/persistence/fs-store.ts";
import { openStore } from "../../src/persistence/open-store.ts";
import { PersistenceSchema } from "../../src/shared/config-persistence.ts";
import { GcsStore } from "../../src/persistence/gcs-store.ts";
import { S3Store } from "../../src/persistence/s3-store.ts";
import { StoreError, type ObjectStore } from "../../src/persistence/store.ts";
import { persistenceFsHandler } from "../../runner-host/cli/persistence-fs.ts";
import { startFakeGcs, type FakeGcs } from "../helpers/fake-gcs.ts";
import { checkStoreContract, checkStoreList } from "../helpers/store-contract.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));

let s3: { close(): Promise<void> };
let s3url: string;
let gcs: FakeGcs;
let gcsOpen: FakeGcs;
const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const fsDir = mkdtempSync(path.join(tmpdir(), "svc-fs-store-"));

beforeAll(async () => {
  const server = new S3rver({ address: "127.0.0.1", port: 0, directory: mkdtempSync(path.join(tmpdir(), "s3rver-")), silent: true, configureBuckets: [{ name: "sess" }] });
  const { port } = await server.run();
  s3 = server;
  s3url = `http://127.0.0.1:${port}`;
  gcs = await startFakeGcs({ bucket: "sess", publicKey });
  gcsOpen = await startFakeGcs({ bucket: "sess" });
});
afterAll(async () => {
  await s3?.close();
  await gcs?.close();
  await gcsOpen?.close();
});

function serviceAccount(tokenUri: string): string {
  return JSON.stringify({
    type: "service_account",
    client_email: "svc@project.iam.gserviceaccount.com",
    private_key: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    token_uri: tokenUri,
  });
}

/**
 * `peerKeepsFirst`: the peer itself refuses a create over an existing key. s3rver ignores
 * `If-None-Match` (S3 and R2 honour it), so for the S3 API the precondition is checked on the
 * request instead ("s3: create-only uploads send If-None-Match …" below). s3rver also escapes
 * list answers twice, so its listing is checked with plain keys and the S3 list's escaping below.
 */
const stores: [string, () => ObjectStore, boolean][] = [
  ["s3 (SigV4, path-style endpoint)", () => new S3Store({ kind: "s3", bucket: "sess", region: "us-east-1", endpoint: s3url, accessKeyId: "S3RVER", secretAccessKey: "S3RVER", listPage: 2 }), false],
  ["r2 over the S3 API (region auto)", () => new S3Store({ kind: "r2", bucket: "sess", region: "auto", endpoint: s3url, accessKeyId: "S3RVER", secretAccessKey: "S3RVER", listPage: 2 }), false],
  ["gcs (JSON API, service-account token)", () => new GcsStore({ bucket: "sess", credential: serviceAccount(`${gcs.url}/token`), emulator: gcs.url, listPage: 2 }), true],
  ["filesystem (the local stack's file service)", () => new FsStore({ fetch: (u: string, init?: RequestInit) => persistenceFsHandler(fsDir)(new Request(u, init)) }), true],
];

describe.each(stores)("persistence provider %s", (_name, make, peerKeepsFirst) => {
  it("creates immutable objects once, overwrites the pointer, reads back byte-exact, deletes", async () => {
    await checkStoreContract(make(), peerKeepsFirst);
  });
  it("lists every key under a session's folder, page after page, and nothing of a folder whose name starts alike", async () => {
    await checkStoreList(make(), !peerKeepsFirst);
  });
});

describe("provider peculiarities", () => {
  it("s3 without configured keys uses the default chain: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION", async () => {
    const p = PersistenceSchema.parse({ provider: "s3", bucket: "sess", endpoint: s3url });
    const store = openStore({}, p, { AWS_ACCESS_KEY_ID: "S3RVER", AWS_SECRET_ACCESS_KEY: "S3RVER", AWS_REGION: "eu-west-1" });
    await store.put("chain/k", bytes("via the chain"), "text/plain");
    expect(text(await store.get("chain/k"))).toBe("via the chain");
    const wrong = openStore({}, PersistenceSchema.parse({ provider: "s3", bucket: "sess", endpoint: s3url }), { AWS_ACCESS_KEY_ID: "S3RVER", AWS_SECRET_ACCESS_KEY: "nope" });
    await expect(wrong.get("chain/k")).rejects.toThrow(/HTTP 403/);
  });

  it("s3: a wrong secret is refused by the signature check and reported as a store error", async () => {
    const store = new S3Store({ kind: "s3", bucket: "sess", region: "us-east-1", endpoint: s3url, accessKeyId: "S3RVER", secretAccessKey: "wrong" });
    await expect(store.put("k", bytes("x"), "text/plain")).rejects.toThrow(/HTTP 403.*SignatureDoesNotMatch/);
  });

  it("s3: a ListObjectsV2 answer as S3 writes it (keys escaped once) is decoded, pages follow NextContinuationToken, a truncated page without one is a store error", async () => {
    const seen: URL[] = [];
    const page = (keys: string[], next?: string) =>
      `<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>sess</Name><Prefix>f/</Prefix>` +
      keys.map((k) => `<Contents><Key>${k}</Key><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>`).join("") +
      `<IsTruncated>${next !== undefined}</IsTruncated>${next ? `<NextContinuationToken>${next}</NextContinuationToken>` : ""}</ListBucketResult>`;
    let answers: string[] = [];
    const store = new S3Store({
      kind: "s3", bucket: "sess", region: "us-east-1", endpoint: s3url, accessKeyId: "S3RVER", secretAccessKey: "S3RVER", listPage: 2,
      fetch: async (request) => {
        seen.push(new URL(request.url));
        return new Response(answers.shift(), { status: 200, headers: { "Content-Type": "application/xml" } });
      },
    });
    answers = [page(["f/a&amp;b", "f/&lt;c&gt;&#13;"], "1/tok+en=="), page(["f/&quot;d&apos; &#x4e2d;"])];
    expect(await store.list("f g+/")).toEqual(["f/a&b", "f/<c>\r", `f/"d' 中`]);
    // A space goes as %20 and a plus as %2B: S3 reads the query as RFC 3986, never as a form.
    expect(seen.map((q) => q.search)).toEqual([
      "?list-type=2&prefix=f%20g%2B%2F&max-keys=2",
      "?list-type=2&prefix=f%20g%2B%2F&max-keys=2&continuation-token=1%2Ftok%2Ben%3D%3D",
    ]);
    answers = [page(["f/a"], "")];
    await expect(store.list("f/")).rejects.toThrow(StoreError);
  });

  it("s3: create-only uploads send If-None-Match: * and take the peer's 412 as success; other failures are store errors", async () => {
    const seen: { method: string; ifNoneMatch: string | null }[] = [];
    let answer: number | undefined;
    const store = new S3Store({
      kind: "s3", bucket: "sess", region: "us-east-1", endpoint: s3url, accessKeyId: "S3RVER", secretAccessKey: "S3RVER",
      fetch: async (request) => {
        seen.push({ method: request.method, ifNoneMatch: request.headers.get("If-None-Match") });
        return answer ? new Response("<Error/>", { status: answer }) : fetch(request);
      },
    });
    const key = `c/${crypto.randomUUID()}`;
    await store.create(key, bytes("first"), "text/plain");
    await store.put(`${key}.latest`, bytes("pointer"), "application/json");
    answer = 412; // what S3 and R2 answer for an existing key
    await store.create(key, bytes("second"), "text/plain");
    answer = 500;
    await expect(store.create(key, bytes("third"), "text/plain")).rejects.toThrow(/HTTP 500/);
    answer = undefined;
    expect(text(await store.get(key))).toBe("first");
    expect(seen.slice(0, 3)).toEqual([
      { method: "PUT", ifNoneMatch: "*" },
      { method: "PUT", ifNoneMatch: null },
      { method: "PUT", ifNoneMatch: "*" },
    ]);
  });

  it("gcs: create-only uploads use ifGenerationMatch=0, every object request carries the exchanged bearer token", async () => {
    const store = new GcsStore({ bucket: "sess", credential: serviceAccount(`${gcs.url}/token`), emulator: gcs.url });
    const key = `c/${crypto.randomUUID()}`;
    await store.create(key, bytes("first"), "text/plain");
    await store.create(key, bytes("second"), "text/plain");
    expect(text(await store.get(key))).toBe("first");
    const objectCalls = gcs.log.filter((l) => l.path !== "/token");
    expect(objectCalls.length).toBeGreaterThan(0);
    expect(objectCalls.every((l) => l.authorized)).toBe(true);
  });

  it("gcs: a key the token endpoint does not accept is a store error", async () => {
    const other = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ type: "pkcs8", format: "pem" }).toString();
    const credential = JSON.stringify({ client_email: "x@y", private_key: other, token_uri: `${gcs.url}/token` });
    const store = new GcsStore({ bucket: "sess", credential, emulator: gcs.url });
    await expect(store.get("anything")).rejects.toBeInstanceOf(StoreError);
  });

  it("gcs and the file service: a list answer that is not a page of objects (not JSON, another shape) is a store error", async () => {
    for (const answer of ["<html>", '{"items": "x"}', '{"items": [{"name": 1}]}', '{"nextPageToken": ""}']) {
      const server = net.createServer((c) => c.once("data", () => c.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${answer.length}\r\nconnection: close\r\n\r\n${answer}`)));
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      try {
        const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
        await expect(new GcsStore({ bucket: "sess", emulator: url }).list("p/")).rejects.toThrow(new StoreError("gcs list p/: an answer that is not a page of objects"));
      } finally {
        await new Promise((r) => server.close(r));
      }
    }
    for (const answer of ["nope", '{"keys": "x"}', '{"keys": [1]}', '{"keys": [], "more": 1}']) {
      const store = new FsStore({ fetch: async () => new Response(answer, { status: 200 }) });
      await expect(store.list("p/")).rejects.toThrow(new StoreError("filesystem list p/: an answer that is not a page of objects"));
    }
  });

  it("filesystem: objects are plain files under directory/key", async () => {
    const store = stores[3]![1]();
    await store.create("svc/a/blocks/b.ndjson", bytes("line\n"), "application/x-ndjson");
    expect(readFileSync(path.join(fsDir, "svc/a/blocks/b.ndjson"), "utf8")).toBe("line\n");
    // Keys never leave the directory: dot segments are resolved away, an encoded slash is refused.
    expect(await store.get("../escape")).toBeNull();
    expect((await persistenceFsHandler(fsDir)(new Request("http://fs/o/a%2F..%2F..%2Fetc%2Fpasswd"))).status).toBe(400);
    // A list is the files under the prefix's folder: a create's temporary file is no object, and a
    // prefix with a dot segment is refused.
    writeFileSync(path.join(fsDir, "svc/a/blocks/b.ndjson.0123456789ab.tmp"), "half");
    expect(await store.list("svc/a/")).toEqual(["svc/a/blocks/b.ndjson"]);
    expect((await persistenceFsHandler(fsDir)(new Request("http://fs/list?prefix=svc%2F..%2F..%2F"))).status).toBe(400);
  });

  it.runIf(existsSync("/proc/self"))("filesystem: a directory the system will not create is a write error, not an absent object", async () => {
    const store = new FsStore({ fetch: (u: string, init?: RequestInit) => persistenceFsHandler("/proc/svc-no-such-dir")(new Request(u, init)) });
    const failed = await store.put("svc/a/latest.json", bytes("{}"), "application/json").catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(StoreError);
    expect(String((failed as Error).message)).not.toMatch(/not found|404/);
  });

  it("filesystem: a write that fails leaves no temporary file behind", async () => {
    const store = stores[3]![1]();
    // The target is a non-empty directory, so the last step of the write (the rename) fails.
    mkdirSync(path.join(fsDir, "svc/b/latest.json/x"), { recursive: true });
    await expect(store.put("svc/b/latest.json", bytes("{}"), "application/json")).rejects.toBeInstanceOf(StoreError);
    expect(readdirSync(path.join(fsDir, "svc/b"))).toEqual(["latest.json"]);
  });
});

describe("a store that stops answering", () => {
  /**
   * A peer that accepts connections and reads requests but never answers (`headers`: sends a
   * 200 with a long body's first bytes, then nothing more).
   */
  async function silentPeer(headers: boolean): Promise<{ url: string; close(): Promise<void> }> {
    const sockets = new Set<net.Socket>();
    const server = net.createServer((socket) => {
      sockets.add(socket);
      socket.on("error", () => {}).on("close", () => sockets.delete(socket));
      socket.once("data", () => {
        if (headers) socket.write("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\nfirst bytes");
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as net.AddressInfo;
    return {
      url: `http://127.0.0.1:${port}`,
      close: () => new Promise<void>((resolve) => (sockets.forEach((s) => s.destroy()), server.close(() => resolve()))),
    };
  }

  it.each([
    ["s3", (url: string) => new S3Store({ kind: "s3", bucket: "sess", region: "us-east-1", endpoint: url, accessKeyId: "a", secretAccessKey: "b", timeoutMs: 300 })],
    ["gcs", (url: string) => new GcsStore({ bucket: "sess", emulator: url, timeoutMs: 300 })],
  ])("%s: a call the peer never answers, or whose body stops coming, fails as a store error after the bound", async (_name, make) => {
    const silent = await silentPeer(false);
    const stalled = await silentPeer(true);
    try {
      for (const call of [(st: ObjectStore) => st.put("k", bytes("x"), "text/plain"), (st: ObjectStore) => st.get("k")]) {
        const error = await call(make(silent.url)).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(StoreError);
        expect((error as Error).message).toMatch(/no answer within 0\.3 s/);
      }
      const error = await make(stalled.url).get("k").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreError);
      expect((error as Error).message).toMatch(/no answer within 0\.3 s/);
    } finally {
      await Promise.all([silent.close(), stalled.close()]);
    }
  });
});

describe("the fake GCS server, checked with the official @google-cloud/storage client", () => {
  it("saves, downloads (with checksum validation), lists by prefix page after page, and answers 404 for a missing object", async () => {
    const before = process.env.STORAGE_EMULATOR_HOST;
    process.env.STORAGE_EMULATOR_HOST = gcsOpen.url;
    try {
      const { Storage } = await import("@google-cloud/storage");
      const bucket = new Storage({ projectId: "test" }).bucket("sess");
      await bucket.file("dir/a b.txt").save("hello ä", { resumable: false });
      const [data] = await bucket.file("dir/a b.txt").download();
      expect(data.toString("utf8")).toBe("hello ä");
      const [files] = await bucket.getFiles({ prefix: "dir/" });
      expect(files.map((f) => f.name)).toEqual(["dir/a b.txt"]);
      // Pages, one at a time: the client hands back the query for the next one (nextPageToken).
      for (const n of ["p/1", "p/2", "p/3"]) await bucket.file(n).save(n, { resumable: false });
      const [first, next] = await bucket.getFiles({ prefix: "p/", maxResults: 2, autoPaginate: false });
      expect(first.map((f) => f.name)).toEqual(["p/1", "p/2"]);
      const [second, last] = await bucket.getFiles({ ...next!, autoPaginate: false });
      expect(second.map((f) => f.name)).toEqual(["p/3"]);
      expect(last).toBeNull();
      await expect(bucket.file("dir/missing").download()).rejects.toMatchObject({ code: 404 });
      // What the client stored is what the service's provider reads back.
      const ours = new GcsStore({ bucket: "sess", emulator: gcsOpen.url });
      expect(text(await ours.get("dir/a b.txt"))).toBe("hello ä");
      await bucket.file("dir/a b.txt").delete();
      expect(await ours.get("dir/a b.txt")).toBeNull();
    } finally {
      if (before === undefined) delete process.env.STORAGE_EMULATOR_HOST;
      else process.env.STORAGE_EMULATOR_HOST = before;
    }
  });
});
