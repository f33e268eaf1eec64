/**
 * Persistence against real peers through the local stack: S3 (@20minutes/s3rver, SigV4 checked),
 * R2 through workerd's R2 binding, GCS (the fake JSON API with a service-account token). Outages
 * of the store and a SIGKILL of the stack mid-upload lose nothing and duplicate no block; the
 * persistence queue bound gives 429 and readiness 503; restore and load work on a fresh data_dir.
 */
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call, expectApiError } from "../helpers/api.ts";
import { startFakeGcs } from "../helpers/fake-gcs.ts";
import { allEvents, baseEnv, createSession, expectBlocks, ndjson, stackConfig, TOKEN, turn, uncursored } from "../helpers/persistence.ts";
import { S3_KEY, startS3, type S3Peer } from "../helpers/s3.ts";
import { startProxy } from "../helpers/proxy.ts";
import { openSse } from "../helpers/sse.ts";
import { secret, startStack } from "../helpers/stack.ts";

let provider: ScriptedProvider;
let s3: S3Peer;

beforeAll(async () => {
  provider = await startScriptedProvider();
  s3 = await startS3();
});
afterAll(async () => {
  await provider?.close();
  await s3?.stop();
});

const s3Env = { ...baseEnv, S3_ACCESS: S3_KEY, S3_SECRET: S3_KEY };
const s3Persistence = (over: Record<string, unknown> = {}) => ({
  provider: "s3",
  bucket: "sess",
  region: "us-east-1",
  endpoint: s3.url,
  access_key_env: "S3_ACCESS",
  secret_key_env: "S3_SECRET",
  interval_seconds: 1,
  ...over,
});

/** Once the store answers again: a flush uploads everything, with no error left, and storage holds the history. */
async function expectFlushCatchesUp(url: string, id: string): Promise<void> {
  const after = await call(url, "POST", `/sessions/${id}/flush`, { token: TOKEN });
  expect(after.body).toMatchObject({ pending: false });
  expect(after.body.error).toBeUndefined();
  await expectStoredHistory(id, ndjson(await allEvents(url, id)));
}

/** The session's stored blocks: whole lines, ≤64 KiB, contiguous from 0, no duplicate, = history. */
async function expectStoredHistory(id: string, history: string): Promise<void> {
  const keys = (await s3.keys("")).filter((k) => k.includes(`/${id}/blocks/`)).sort();
  const blocks = await Promise.all(keys.map(async (key) => ({ key, body: await s3.get(key) })));
  expectBlocks(blocks, history);
  let at = 0;
  for (const b of blocks) {
    const start = Number(/blocks\/(\d{16})-/.exec(b.key)![1]);
    expect(start).toBe(at);
    at += b.body.byteLength;
  }
  expect(at).toBe(Buffer.byteLength(history));
}

describe("s3 (s3rver)", () => {
  it("restore and load work on a fresh data_dir with the same storage", async () => {
    const first = await startStack({ config: stackConfig(provider, s3Persistence()), env: s3Env });
    const s = await createSession(first.url);
    const c1 = await turn(first.url, s, "one");
    const c2 = await turn(first.url, s, "two");
    expect((await call(first.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN })).body).toMatchObject({ pending: false, checkpoint: c2.id });
    const events = await allEvents(first.url, s.id);
    await expectStoredHistory(s.id, ndjson(events));
    s.sse.close();
    await first.stop();

    const fresh = await startStack({ config: stackConfig(provider, s3Persistence()), env: s3Env });
    try {
      expect((await call(fresh.url, "GET", `/sessions/${s.id}`, { token: TOKEN })).body).toMatchObject({ status: "idle", checkpoint: c2 });
      expect(uncursored(await allEvents(fresh.url, s.id))).toEqual(uncursored(events));
      const r = await call(fresh.url, "POST", `/sessions/${s.id}/restore`, { token: TOKEN, body: { checkpoint: c1.id } });
      expect(r.body).toMatchObject({ status: "idle", checkpoint: c1 });
      const sse = await openSse(`${fresh.url}/sessions/${s.id}/events`, { token: TOKEN, lastEventId: (await allEvents(fresh.url, s.id)).at(-1)!.cursor });
      await turn(fresh.url, { id: s.id, sse }, "three");
      sse.close();
      const sent = provider.requests.at(-1)!.body.messages.filter((m: { role: string }) => m.role !== "system").map((m: { content: unknown }) => m.content);
      expect(JSON.stringify(sent)).toContain("one");
      expect(JSON.stringify(sent)).not.toContain("two");
    } finally {
      await fresh.stop();
    }
  });

  it("the store stopped mid-upload and restarted: flush reports pending:true meanwhile, then nothing is lost and no block is duplicated", async () => {
    const stack = await startStack({ config: stackConfig(provider, s3Persistence({ interval_seconds: 3600 })), env: s3Env });
    try {
      const s = await createSession(stack.url);
      for (let i = 0; i < 6; i++) await turn(stack.url, s, `${i}`.repeat(30_000));
      let stopping: Promise<void> | undefined;
      s3.onPut((key) => {
        if (key.includes(`/${s.id}/blocks/`)) stopping ??= s3.stop();
      });
      const during = await call(stack.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN });
      await stopping;
      expect(during.status).toBe(200);
      expect(during.body.pending).toBe(true);
      expect(during.body.error).toEqual(expect.any(String));
      const sync = await call(stack.url, "GET", `/sessions/${s.id}/sync`, { token: TOKEN });
      expect(sync.body).toMatchObject({ pending: true, error: expect.any(String) });

      await s3.start();
      await expectFlushCatchesUp(stack.url, s.id);
    } finally {
      await stack.stop();
    }
  });

  it("a store that accepts connections and never answers: the round fails after its bound and is retried; once it answers, flush catches the session up", async () => {
    const gate = await startProxy(s3.url);
    gate.stall(true);
    const stack = await startStack({ config: stackConfig(provider, s3Persistence({ endpoint: gate.url })), env: s3Env });
    try {
      const s = await createSession(stack.url);
      await turn(stack.url, s, "while the store hangs");
      await stack.waitForLog(new RegExp(`"msg":"sync round failed","session_id":"${s.id}".*no answer within 20 s`), 60_000);
      const sync = await call(stack.url, "GET", `/sessions/${s.id}/sync`, { token: TOKEN });
      expect(sync.body).toMatchObject({ pending: true, error: expect.stringMatching(/no answer within 20 s/) });

      // The store answers new connections again; the stalled ones stay open and silent.
      gate.stall(false);
      await expectFlushCatchesUp(stack.url, s.id);
    } finally {
      await stack.stop();
      await gate.close();
    }
  }, 120_000);

  it("SIGKILL of the whole local stack mid-upload: after a restart the upload resumes without gaps or duplicate blocks", async () => {
    let stack = await startStack({ config: stackConfig(provider, s3Persistence({ interval_seconds: 3600 })), env: s3Env });
    const s = await createSession(stack.url);
    for (let i = 0; i < 6; i++) await turn(stack.url, s, `${i}`.repeat(30_000));
    const history = ndjson(await allEvents(stack.url, s.id));
    // The first stored block of this session kills the stack while the rest are on their way.
    const crashed = new Promise<void>((resolve) => {
      let crashing: Promise<void> | undefined;
      s3.onPut((key) => {
        if (key.includes(`/${s.id}/blocks/`)) crashing ??= stack.crash().then(resolve);
      });
    });
    void call(stack.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN }).catch(() => undefined);
    await crashed;
    expect((await s3.keys("")).filter((k) => k.includes(`/${s.id}/blocks/`)).length).toBeLessThan(6);

    stack = await startStack({ config: stackConfig(provider, s3Persistence({ interval_seconds: 3600 })), env: s3Env, dir: stack.dir });
    try {
      // The startup scan wakes the session, whose upload resumes at once. The first readiness
      // probe starts the scan and waits for it (it is short), so it answers after the scan.
      const mark = stack.mark();
      expect((await call(stack.url, "GET", "/health/ready")).status).toBe(200);
      expect(JSON.parse(await stack.waitForLog(/"msg":"sync startup scan finished"/, 20_000, mark))).toMatchObject({ sessions: 1 });
      await stack.waitForLog(/"msg":"sync round".*"done":true/, 20_000, mark);
      expect((await call(stack.url, "GET", "/health/ready")).status).toBe(200);
      expect((await call(stack.url, "GET", `/sessions/${s.id}/sync`, { token: TOKEN })).body.pending).toBe(false);
      await expectStoredHistory(s.id, history);
    } finally {
      await stack.stop();
    }
  });
});

/** A local stack whose filesystem persistence queue holds one session. */
async function oneSlotQueueStack(interval_seconds: number) {
  const dir = mkdtempSync(path.join(tmpdir(), "svc-queue-"));
  const persistence = { provider: "filesystem", directory: path.join(dir, "store"), queue: 1, interval_seconds };
  return startStack({ config: stackConfig(provider, persistence), env: baseEnv });
}

describe("persistence queue", () => {
  it("more than persistence.queue sessions waiting to upload: 429 overloaded on new writes (a new session; a message, restore or resume of a caught-up session; never a close) and 503 from readiness", async () => {
    const stack = await oneSlotQueueStack(3600);
    try {
      // Nothing waits to upload: the scan is done at once, and readiness is 200 from the first probe.
      expect((await call(stack.url, "GET", "/health/ready")).status).toBe(200);
      const a = await createSession(stack.url);
      const ready = await call(stack.url, "GET", "/health/ready");
      expect(ready.status).toBe(503);
      expect(ready.body).toEqual({ status: "not_ready" });
      const body = { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } };
      expectApiError(await call(stack.url, "POST", "/sessions", { token: TOKEN, body }), 429, "overloaded");
      // The queued session itself keeps accepting writes: it is already counted.
      const first = await call(stack.url, "POST", `/sessions/${a.id}/events`, { token: TOKEN, body: { type: "user.message", text: "hi", key: "k-hi" } });
      expect(first.status).toBe(202);
      await a.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle");
      expect((await call(stack.url, "POST", `/sessions/${a.id}/flush`, { token: TOKEN })).body.pending).toBe(false);
      expect((await call(stack.url, "GET", "/health/ready")).status).toBe(200);
      const b = await call(stack.url, "POST", "/sessions", { token: TOKEN, body });
      expect(b.status).toBe(201);
      // b fills the queue again; a is caught up, so its next message must join and is refused,
      // recording nothing, until b's upload leaves room.
      const message = { token: TOKEN, body: { type: "user.message", text: "later" } };
      const before = await allEvents(stack.url, a.id);
      expectApiError(await call(stack.url, "POST", `/sessions/${a.id}/events`, message), 429, "overloaded");
      expect(await allEvents(stack.url, a.id)).toEqual(before);
      // A repeated key is answered with its original event: it adds nothing to upload.
      const again = await call(stack.url, "POST", `/sessions/${a.id}/events`, { token: TOKEN, body: { type: "user.message", text: "hi", key: "k-hi" } });
      expect([again.status, again.body.id]).toEqual([202, first.body.id]);
      // A restore and a resume of it are refused like the message: each is a change to upload.
      const checkpoint = (await call(stack.url, "GET", `/sessions/${a.id}`, { token: TOKEN })).body.checkpoint.id;
      expectApiError(await call(stack.url, "POST", `/sessions/${a.id}/restore`, { token: TOKEN, body: { checkpoint } }), 429, "overloaded");
      expect(await allEvents(stack.url, a.id)).toEqual(before);
      expect((await call(stack.url, "POST", `/sessions/${b.body.id}/flush`, { token: TOKEN })).body.pending).toBe(false);
      expect((await call(stack.url, "POST", `/sessions/${a.id}/events`, { ...message, body: { type: "user.message", text: "[[hang]]" } })).status).toBe(202);
      await a.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "running" && f.json.input_id !== undefined);
      expect((await call(stack.url, "POST", `/sessions/${a.id}/events`, { token: TOKEN, body: { type: "user.interrupt" } })).status).toBe(202);
      await a.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "interrupted");
      expect((await call(stack.url, "POST", `/sessions/${a.id}/flush`, { token: TOKEN })).body.pending).toBe(false);
      const c = await call(stack.url, "POST", "/sessions", { token: TOKEN, body });
      expect(c.status).toBe(201);
      expectApiError(await call(stack.url, "POST", `/sessions/${a.id}/resume`, { token: TOKEN, body: {} }), 429, "overloaded");
      expect((await call(stack.url, "GET", `/sessions/${a.id}`, { token: TOKEN })).body.status).toBe("interrupted");
      // A close is never refused for it.
      expect((await call(stack.url, "POST", `/sessions/${c.body.id}/close`, { token: TOKEN, body: {} })).status).toBe(202);
      expect((await call(stack.url, "POST", `/sessions/${c.body.id}/flush`, { token: TOKEN })).body.pending).toBe(false);
      expect((await call(stack.url, "POST", `/sessions/${a.id}/resume`, { token: TOKEN, body: {} })).status).toBe(200);
    } finally {
      await stack.stop();
    }
  });
});

describe("persistence queue shared by tenants", () => {
  it("one tenant holds at most three quarters of persistence.queue: past its share its new sessions get 429 while another tenant's are created, and readiness stays 200 until the queue itself is full", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "svc-queue-"));
    const other = secret("persist-other");
    const config = {
      ...stackConfig(provider, { provider: "filesystem", directory: path.join(dir, "store"), queue: 4, interval_seconds: 3600 }),
      tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }, { token_env: "OTHER", tenant: "u", manage: true }],
    };
    const stack = await startStack({ config, env: { ...baseEnv, OTHER: other } });
    try {
      // The backlog's first status runs its startup scan, which starts queued sessions' uploads: done
      // while nothing is queued.
      expect((await call(stack.url, "GET", "/health/ready")).status).toBe(200);
      const body = { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } };
      for (let i = 0; i < 3; i++) expect((await call(stack.url, "POST", "/sessions", { token: TOKEN, body })).status).toBe(201);
      const refused = await call(stack.url, "POST", "/sessions", { token: TOKEN, body });
      expectApiError(refused, 429, "overloaded");
      expect(refused.body.error.message).toBe("3 of this tenant's sessions are waiting to upload to storage (its share of the deployment's 4)");
      expect((await call(stack.url, "GET", "/health/ready")).status).toBe(200);
      expect((await call(stack.url, "POST", "/sessions", { token: other, body })).status).toBe(201);
      expect((await call(stack.url, "GET", "/health/ready")).status).toBe(503);
    } finally {
      await stack.stop();
    }
  });
});

describe("persistence queue, writes that record nothing", () => {
  it("a repeated key or a refused message to a caught-up session holds no place in the queue: readiness stays 200 and new sessions are created", async () => {
    const stack = await oneSlotQueueStack(1);
    try {
      const a = await createSession(stack.url);
      const first = await call(stack.url, "POST", `/sessions/${a.id}/events`, { token: TOKEN, body: { type: "user.message", text: "hi", key: "k1" } });
      expect(first.status).toBe(202);
      await a.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle");
      // Caught up. Not by waiting for a round's log: on a loaded machine the first round (a second
      // after the message) can run mid-turn, end done, and the turn's last events start another.
      expect((await call(stack.url, "POST", `/sessions/${a.id}/flush`, { token: TOKEN })).body.pending).toBe(false);
      expect((await call(stack.url, "GET", "/health/ready")).status).toBe(200);
      const again = await call(stack.url, "POST", `/sessions/${a.id}/events`, { token: TOKEN, body: { type: "user.message", text: "hi", key: "k1" } });
      expect([again.status, again.body.id]).toEqual([202, first.body.id]);
      expectApiError(await call(stack.url, "POST", `/sessions/${a.id}/events`, { token: TOKEN, body: { type: "user.message", text: "other", key: "k1" } }), 409, "conflict");
      expectApiError(await call(stack.url, "POST", `/sessions/${a.id}/events`, { token: TOKEN, body: { type: "user.message", text: "x", delivery: "steer" } }), 422, "unsupported");
      expect((await call(stack.url, "GET", "/health/ready")).status).toBe(200);
      expect((await call(stack.url, "POST", "/sessions", { token: TOKEN, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } })).status).toBe(201);
      a.sse.close();
    } finally {
      await stack.stop();
    }
  });
});

describe("r2 (workerd R2 binding)", () => {
  it("uploads through the bound bucket and restores from it", async () => {
    const persistence = { provider: "r2", bucket: "agent-session-service", endpoint: "http://127.0.0.1:9", access_key_env: "R2_ACCESS", secret_key_env: "R2_SECRET", interval_seconds: 1 };
    const stack = await startStack({ config: stackConfig(provider, persistence), env: { ...baseEnv, R2_ACCESS: "unused-key", R2_SECRET: "unused-secret" } });
    try {
      const s = await createSession(stack.url);
      const c1 = await turn(stack.url, s, "r2 one");
      const c2 = await turn(stack.url, s, "r2 two");
      expect((await call(stack.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN })).body).toMatchObject({ pending: false, checkpoint: c2.id });
      const r = await call(stack.url, "POST", `/sessions/${s.id}/restore`, { token: TOKEN, body: { checkpoint: c1.id } });
      expect(r.body).toMatchObject({ status: "idle", checkpoint: c1 });
      expect((await call(stack.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN })).body).toMatchObject({ pending: false, checkpoint: c1.id });
    } finally {
      await stack.stop();
    }
  });
});

/** The fake GCS with a service account of its own, and the stack's environment pointing at it. */
async function startGcsPeer() {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const gcs = await startFakeGcs({ bucket: "sess", publicKey });
  const account = JSON.stringify({
    type: "service_account",
    client_email: "svc@p.iam.gserviceaccount.com",
    private_key: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    token_uri: `${gcs.url}/token`,
  });
  return { gcs, env: { ...baseEnv, GCS_SERVICE_ACCOUNT: account, STORAGE_EMULATOR_HOST: gcs.url } };
}

describe("shutdown with a request in flight", () => {
  it("a flush caught in the middle of its upload round by SIGTERM is answered before the service exits", async () => {
    const { gcs, env } = await startGcsPeer();
    // No background round: the flush is the one that uploads.
    const persistence = { provider: "gcs", bucket: "sess", prefix: "g/", interval_seconds: 3600 };
    try {
      const stack = await startStack({ config: stackConfig(provider, persistence), env });
      const s = await createSession(stack.url);
      const cp = await turn(stack.url, s, "flush at shutdown");
      s.sse.close();
      const gate = gcs.holdUploads();
      const flush = call(stack.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN });
      await gate.held;
      const stopped = stack.stop();
      // The stop has reached its last step before the runtime goes: the upload may go on now.
      await stack.waitForLog(/"msg":"ending event streams and answering requests in flight"/);
      gate.release();
      const answer = await flush;
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ pending: false, checkpoint: cp.id });
      expect((await stopped).code).toBe(0);
      expect(stack.stderr()).toMatch(/"msg":"event streams ended".*"unanswered":0/);
      expect([...gcs.objects.keys()].some((k) => k.endsWith(`${s.id}/checkpoints/${cp.id}.json`))).toBe(true);
    } finally {
      await gcs.close();
    }
  });
});

describe("gcs (JSON API fake)", () => {
  it("uploads with a service-account token and loads on a fresh data_dir", async () => {
    const { gcs, env } = await startGcsPeer();
    const persistence = { provider: "gcs", bucket: "sess", prefix: "g/", interval_seconds: 1 };
    try {
      const first = await startStack({ config: stackConfig(provider, persistence), env });
      const s = await createSession(first.url);
      const cp = await turn(first.url, s, "gcs hello");
      expect((await call(first.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN })).body).toMatchObject({ pending: false, checkpoint: cp.id });
      const events = await allEvents(first.url, s.id);
      s.sse.close();
      await first.stop();
      expect([...gcs.objects.keys()].some((k) => k.startsWith("g/") && k.endsWith(`${s.id}/checkpoints/${cp.id}.json`))).toBe(true);
      expect(gcs.log.filter((l) => l.path !== "/token").every((l) => l.authorized)).toBe(true);

      const fresh = await startStack({ config: stackConfig(provider, persistence), env });
      try {
        expect(uncursored(await allEvents(fresh.url, s.id))).toEqual(uncursored(events));
      } finally {
        await fresh.stop();
      }
    } finally {
      await gcs.close();
    }
  });
});
