/**
 * Persistence end to end with the `filesystem` provider (docs/configuration.md "Persistence",
 * docs/api.md "Flush, sync, restore"): the real local stack, reference harness and
 * scripted provider; the stored files are read back by the test.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call, expectApiError } from "../helpers/api.ts";
import { registerExecutor } from "../helpers/executors.ts";
import { openSse } from "../helpers/sse.ts";
import { allEvents, baseEnv, createSession, expectBlocks, ndjson, readTree, stackConfig, TOKEN, turn, uncursored } from "../helpers/persistence.ts";
import { startStack, type Stack } from "../helpers/stack.ts";

let provider: ScriptedProvider;
let stack: Stack;
const root = mkdtempSync(path.join(tmpdir(), "svc-persist-"));
const store = path.join(root, "store");
const persistence = { provider: "filesystem", directory: store, prefix: "svc", interval_seconds: 1 };

beforeAll(async () => {
  provider = await startScriptedProvider();
  stack = await startStack({ config: stackConfig(provider, persistence), env: baseEnv });
});
afterAll(async () => {
  await stack?.stop();
  await provider?.close();
});

const get = (p: string) => call(stack.url, "GET", p, { token: TOKEN });
const post = (p: string, body?: unknown) => call(stack.url, "POST", p, { token: TOKEN, body });

/** The stored objects of one session, keyed by their path below the session's folder. */
function sessionObjects(id: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const [k, v] of readTree(store)) {
    const m = new RegExp(`^svc/[0-9a-f]{32}/${id}/(.*)$`).exec(k);
    if (m) out.set(m[1]!, v);
  }
  return out;
}

/** What the model was sent in the last provider request: user and assistant texts in order. */
function lastConversation(): string[] {
  const messages = provider.requests.at(-1)!.body.messages as { role: string; content: unknown }[];
  const text = (c: unknown) => (typeof c === "string" ? c : (c as { text?: string }[]).map((p) => p.text ?? "").join(""));
  return messages.filter((m) => m.role === "user" || m.role === "assistant").map((m) => `${m.role}:${text(m.content)}`);
}

describe("persistence (filesystem)", () => {
  it("uploads immutable ≤64 KiB transcript blocks, each turn's native checkpoint and a manifest in the background", async () => {
    const s = await createSession(stack.url);
    await turn(stack.url, s, "a".repeat(30_000));
    await turn(stack.url, s, "b".repeat(30_000));
    const cp = await turn(stack.url, s, "c".repeat(60_000));
    const mark = stack.mark();
    await stack.waitForLog(/"msg":"sync round".*"done":true/, 20_000, mark);

    const sync = await get(`/sessions/${s.id}/sync`);
    expect(sync.status).toBe(200);
    const events = await allEvents(stack.url, s.id);
    const history = ndjson(events);
    expect(sync.body).toEqual({
      history_bytes: Buffer.byteLength(history),
      resume_offset: cp.offset,
      pending: false,
      checkpoint: cp.id,
      native_checkpoint: expect.stringMatching(new RegExp(`native/${cp.id}\\.ndjson$`)),
      time: expect.any(String),
    });

    const objects = sessionObjects(s.id);
    const blocks = [...objects].filter(([k]) => k.startsWith("blocks/")).map(([key, body]) => ({ key, body }));
    expect(blocks.length).toBeGreaterThan(2);
    expectBlocks(blocks, history);
    // Together the blocks are the whole history, each byte once: no gap, no duplicate block.
    expect(blocks.reduce((n, b) => n + b.body.byteLength, 0)).toBe(Buffer.byteLength(history));
    const manifest = JSON.parse(objects.get(`checkpoints/${cp.id}.json`)!.toString());
    expect(manifest.checkpoint).toEqual({ id: cp.id, offset: cp.offset, time: expect.any(String) });
    expect(manifest.checkpoints).toHaveLength(3);
    expect(JSON.parse(objects.get("latest.json")!.toString())).toEqual(manifest);
    for (const c of manifest.checkpoints) {
      const native = objects.get(`native/${c.id}.ndjson`)!.toString();
      expect(native.split("\n").length - 1).toBe(c.records);
      expect(c.records).toBeGreaterThan(0);
    }
  });

  it("flush returns SyncStatus with pending false once what was local is uploaded; sync returns the same", async () => {
    const s = await createSession(stack.url);
    const cp = await turn(stack.url, s, "flush me");
    const f = await post(`/sessions/${s.id}/flush`);
    expect(f.status).toBe(200);
    expect(f.body).toMatchObject({ pending: false, checkpoint: cp.id, resume_offset: cp.offset });
    expect((await get(`/sessions/${s.id}/sync`)).body).toEqual(f.body);
    expectApiError(await post(`/sessions/${s.id}/flush`, { extra: 1 }), 400, "invalid_request");
  });

  it("restore replaces history and native state with the checkpoint: cursors past it give 409, the next turn sees exactly the restored conversation", async () => {
    const s = await createSession(stack.url);
    const c1 = await turn(stack.url, s, "one");
    await turn(stack.url, s, "two");
    expect((await post(`/sessions/${s.id}/flush`)).body.pending).toBe(false);
    const before = await allEvents(stack.url, s.id);
    let at = 0;
    const kept = before.filter((e) => (at += Buffer.byteLength(ndjson([e]))) <= c1.offset);
    const lost = before.slice(kept.length);
    expect(lost.length).toBeGreaterThan(0);

    expectApiError(await post(`/sessions/${s.id}/restore`, {}), 400, "invalid_request");
    const nope = await post(`/sessions/${s.id}/restore`, { checkpoint: "nope" });
    expectApiError(nope, 400, "invalid_request");
    expect(nope.body.error.message).toBe("checkpoint: must be a 32-hex checkpoint id");
    expectApiError(await post(`/sessions/${s.id}/restore`, { checkpoint: "0".repeat(32) }), 404, "not_found");

    const r = await post(`/sessions/${s.id}/restore`, { checkpoint: c1.id });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: s.id, status: "idle", checkpoint: c1 });
    expect((await allEvents(stack.url, s.id)).map((e) => e.id)).toEqual(kept.map((e) => e.id));
    // Before the restore answers, latest.json names the restored checkpoint, and only then are the
    // cut-off objects gone: a deployment that loads the session now (say, after this one lost its
    // disk) gets the restored state, not a manifest naming deleted blocks.
    expect(JSON.parse(sessionObjects(s.id).get("latest.json")!.toString()).checkpoint.id).toBe(c1.id);
    expect([...sessionObjects(s.id).keys()].filter((k) => k.startsWith("checkpoints/"))).toEqual([`checkpoints/${c1.id}.json`]);
    expect((await get(`/sessions/${s.id}/sync`)).body).toMatchObject({ pending: false, checkpoint: c1.id });
    const elsewhere = await startStack({ config: stackConfig(provider, persistence), env: baseEnv });
    try {
      const loaded = await call(elsewhere.url, "GET", `/sessions/${s.id}`, { token: TOKEN });
      expect(loaded.body).toMatchObject({ status: "idle", checkpoint: c1 });
      // Restored, then untouched: the load changes nothing, updated_at included.
      expect(loaded.body.updated_at).toBe(r.body.updated_at);
      expect((await allEvents(elsewhere.url, s.id)).map((e) => e.id)).toEqual(kept.map((e) => e.id));
    } finally {
      await elsewhere.stop();
    }
    expectApiError(await get(`/sessions/${s.id}/events?after=${encodeURIComponent(lost.at(-1)!.cursor)}`), 409, "cursor_unavailable");
    const fromKept = await get(`/sessions/${s.id}/events?after=${encodeURIComponent(kept.at(-1)!.cursor)}`);
    expect(fromKept.status).toBe(200);
    expect(fromKept.body.events).toEqual([]);

    const sse = await openSse(`${stack.url}/sessions/${s.id}/events`, { token: TOKEN, lastEventId: kept.at(-1)!.cursor });
    await turn(stack.url, { id: s.id, sse }, "three");
    sse.close();
    expect(lastConversation()).toEqual(["user:one", "assistant:echo: one", "user:three"]);

    // Storage was cut too: the tail's checkpoint is gone, latest.json names the restored one.
    const f = await post(`/sessions/${s.id}/flush`);
    expect(f.body.pending).toBe(false);
    const objects = sessionObjects(s.id);
    const cps = [...objects.keys()].filter((k) => k.startsWith("checkpoints/"));
    expect(cps).toContain(`checkpoints/${c1.id}.json`);
    expect(cps).toHaveLength(2);
  });

  it("one upload covering several turns ends a block at each checkpoint, so a restore deletes every block that holds the cut-off tail", async () => {
    // Only flushes upload here, so one upload round covers both turns.
    const own = path.join(root, "one-round");
    const quiet = await startStack({ config: stackConfig(provider, { ...persistence, directory: own, interval_seconds: 3600 }), env: baseEnv });
    try {
      const s = await createSession(quiet.url);
      const c1 = await turn(quiet.url, s, "kept");
      await turn(quiet.url, s, "CUT-OFF-TAIL");
      expect((await call(quiet.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN })).body.pending).toBe(false);
      const blocks = () => [...readTree(own)].filter(([k]) => k.includes(`/${s.id}/blocks/`)).map(([key, body]) => ({ key, body }));
      const ranges = blocks().map((b) => /(\d{16})-(\d{16})-/.exec(b.key)!.slice(1).map(Number));
      expect(ranges.filter(([start, end]) => start! < c1.offset && end! > c1.offset)).toEqual([]);
      expect(ranges.map(([, end]) => end)).toContain(c1.offset);

      expect((await call(quiet.url, "POST", `/sessions/${s.id}/restore`, { token: TOKEN, body: { checkpoint: c1.id } })).status).toBe(200);
      expect((await call(quiet.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN })).body.pending).toBe(false);
      const history = ndjson(await allEvents(quiet.url, s.id));
      const stored = blocks();
      expect(stored.filter((b) => b.body.toString().includes("CUT-OFF-TAIL")).map((b) => b.key)).toEqual([]);
      expectBlocks(stored, history);
      expect(stored.reduce((n, b) => n + b.body.byteLength, 0)).toBe(Buffer.byteLength(history));
      // The restored checkpoint can be restored again: everything its manifest names is there.
      expect((await call(quiet.url, "POST", `/sessions/${s.id}/restore`, { token: TOKEN, body: { checkpoint: c1.id } })).status).toBe(200);
    } finally {
      await quiet.stop();
    }
  });

  it("restore to a checkpoint taken while messages waited in the queue: each of them ends as a queued input interrupted before execution, then the session is idle", async () => {
    const s = await createSession(stack.url);
    const send = async (text: string) => (await post(`/sessions/${s.id}/events`, { type: "user.message", text })).body.id as string;
    const m1 = await send("[[deltas 10]] [[delay 40]] one");
    const [m2, m3] = [await send("two"), await send("three")];
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === m3);
    expect((await post(`/sessions/${s.id}/flush`)).body.pending).toBe(false);
    // m1's turn ended with m2 and m3 queued behind it: its checkpoint (the first) holds them, unrun.
    const manifests = [...sessionObjects(s.id)].filter(([k]) => k.startsWith("checkpoints/")).map(([, v]) => JSON.parse(v.toString()));
    const c1 = manifests.map((m) => m.checkpoint).sort((a, b) => a.offset - b.offset)[0];

    expect((await post(`/sessions/${s.id}/restore`, { checkpoint: c1.id })).body).toMatchObject({ status: "idle", checkpoint: c1 });
    const events = (await get(`/sessions/${s.id}/events?limit=1000`)).body.events as { type: string; input_id?: string; data: Record<string, unknown> }[];
    const tail = events.slice(events.findIndex((e) => e.type === "assistant.message" && e.input_id === m1) + 1);
    const why = "the queued input was interrupted before execution: the session was restored to a checkpoint taken before it ran";
    expect(tail.map((e) => [e.type, e.input_id, e.data])).toEqual([
      ["session.error", m2, { code: "conflict", message: why }],
      ["session.error", m3, { code: "conflict", message: why }],
      ["session.status", undefined, { status: "idle" }],
    ]);
    // Every accepted message has its outcome: m1 ran, m2 and m3 were ended.
    for (const id of [m1, m2, m3]) expect(events.some((e) => e.type !== "user.message" && e.input_id === id)).toBe(true);
    s.sse.close(); // a restore ends the streams that were open
    const sse = await openSse(`${stack.url}/sessions/${s.id}/events`, { token: TOKEN, lastEventId: (events.at(-1) as unknown as { cursor: string }).cursor });
    await turn(stack.url, { id: s.id, sse }, "four");
    sse.close();
    expect(lastConversation()).toEqual(["user:[[deltas 10]] [[delay 40]] one", `assistant:${"abcdefghij".split("").map((c) => c.repeat(4)).join("")}`, "user:four"]);
  });

  it("two restores at once: one is applied, the other is 409, and storage stays loadable", async () => {
    const s = await createSession(stack.url);
    const c0 = await turn(stack.url, s, "zero");
    await turn(stack.url, s, "one");
    const c2 = await turn(stack.url, s, "two");
    expect((await post(`/sessions/${s.id}/flush`)).body.pending).toBe(false);
    const answers = await Promise.all([c0, c2].map((c) => post(`/sessions/${s.id}/restore`, { checkpoint: c.id })));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
    const applied = answers.find((a) => a.status === 200)!.body.checkpoint;
    expect([c0.id, c2.id]).toContain(applied.id);
    expect((await get(`/sessions/${s.id}`)).body.checkpoint).toEqual(applied);
    expect((await post(`/sessions/${s.id}/flush`)).body).toMatchObject({ pending: false, checkpoint: applied.id });
    const events = await allEvents(stack.url, s.id);
    s.sse.close();
    const elsewhere = await startStack({ config: stackConfig(provider, persistence), env: baseEnv });
    try {
      expect((await call(elsewhere.url, "GET", `/sessions/${s.id}`, { token: TOKEN })).body.checkpoint).toEqual(applied);
      expect(uncursored(await allEvents(elsewhere.url, s.id))).toEqual(uncursored(events));
    } finally {
      await elsewhere.stop();
    }
  });

  it("a message sent while a restore runs is never cut by it: it is in the log after the restore, or the restore is 409", async () => {
    const s = await createSession(stack.url);
    const c0 = await turn(stack.url, s, "base");
    await turn(stack.url, s, "later");
    expect((await post(`/sessions/${s.id}/flush`)).body.pending).toBe(false);
    s.sse.close();
    for (let i = 0; i < 6; i++) {
      const [restored, sent] = await Promise.all([
        post(`/sessions/${s.id}/restore`, { checkpoint: c0.id }),
        // Its turn lasts longer than the restore takes to reach the object, so the restore cannot
        // come after a finished turn (which it may cut: the message was then sent before it).
        post(`/sessions/${s.id}/events`, { type: "user.message", text: `racer ${i} [[ttft 250]]` }),
      ]);
      expect([200, 409]).toContain(restored.status);
      expect(sent.status).toBe(202);
      // Its cursor stays valid (a restore never cuts it), and its turn runs to idle.
      const sse = await openSse(`${stack.url}/sessions/${s.id}/events`, { token: TOKEN, lastEventId: sent.body.cursor });
      expect(sse.status).toBe(200);
      await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === sent.body.id, 20_000);
      sse.close();
      const log = await allEvents(stack.url, s.id);
      expect(log.map((e) => e.id)).toContain(sent.body.id);
    }
  });

  it("a checkpoint an earlier restore cut off is 404 not_found, even while its object still waits to be deleted", async () => {
    const s = await createSession(stack.url);
    const c0 = await turn(stack.url, s, "zero");
    const c1 = await turn(stack.url, s, "one");
    expect((await post(`/sessions/${s.id}/flush`)).body.pending).toBe(false);
    // Hold c1's object in storage past the restore: the restore's upload round stops at latest.json
    // (a directory where the file goes cannot be replaced), before it deletes what was cut off.
    const keys = [...readTree(store).keys()];
    const file = path.join(store, keys.find((k) => k.endsWith(`/${s.id}/checkpoints/${c1.id}.json`))!);
    const latest = path.join(store, keys.find((k) => k.endsWith(`/${s.id}/latest.json`))!);
    rmSync(latest);
    mkdirSync(latest);
    writeFileSync(path.join(latest, "keep"), "");
    try {
      expect((await post(`/sessions/${s.id}/restore`, { checkpoint: c0.id })).body.checkpoint).toEqual(c0);
      expect((await get(`/sessions/${s.id}/sync`)).body).toMatchObject({ pending: true, checkpoint: c0.id, error: expect.stringContaining("latest.json") });
      expect(existsSync(file)).toBe(true);
      expectApiError(await post(`/sessions/${s.id}/restore`, { checkpoint: c1.id }), 404, "not_found");
      expect((await get(`/sessions/${s.id}`)).body.checkpoint).toEqual(c0);
    } finally {
      rmSync(latest, { recursive: true });
    }
    expect((await post(`/sessions/${s.id}/flush`)).body).toMatchObject({ pending: false, checkpoint: c0.id });
    expect(existsSync(file)).toBe(false);
    expectApiError(await post(`/sessions/${s.id}/restore`, { checkpoint: c1.id }), 404, "not_found");
    s.sse.close();
  });

  it("restore takes only this session's own objects, as uploaded: another session's checkpoint, or changed bytes, are refused and nothing is replaced or deleted", async () => {
    const a = await createSession(stack.url);
    const a0 = await turn(stack.url, a, "a zero");
    await turn(stack.url, a, "a one");
    const b = await createSession(stack.url);
    await turn(stack.url, b, "b zero");
    const b1 = await turn(stack.url, b, "b one");
    for (const s of [a, b]) expect((await post(`/sessions/${s.id}/flush`)).body.pending).toBe(false);
    const dirOf = (id: string) => path.join(store, path.dirname([...readTree(store).keys()].find((k) => k.includes(`/${id}/checkpoints/`))!), "..");
    const [aDir, bDir] = [dirOf(a.id), dirOf(b.id)];
    const aEvents = await allEvents(stack.url, a.id);
    const bObjects = readTree(bDir);
    const refused = async (checkpoint: string) => {
      expectApiError(await post(`/sessions/${a.id}/restore`, { checkpoint }), 500, "service_error");
      expect(await allEvents(stack.url, a.id)).toEqual(aEvents);
      expect((await get(`/sessions/${a.id}`)).body.checkpoint.id).not.toBe(a0.id);
    };

    // B's checkpoint file copied into A's folder, under its own name and renamed as one of A's.
    copyFileSync(path.join(bDir, "checkpoints", `${b1.id}.json`), path.join(aDir, "checkpoints", `${b1.id}.json`));
    await refused(b1.id);
    const a0File = path.join(aDir, "checkpoints", `${a0.id}.json`);
    const a0Text = readFileSync(a0File, "utf8");
    copyFileSync(path.join(bDir, "checkpoints", `${b1.id}.json`), a0File);
    await refused(a0.id);
    // B's manifest dressed up as A's: the keys it names are still B's objects.
    const forged = JSON.parse(readFileSync(path.join(bDir, "checkpoints", `${b1.id}.json`), "utf8"));
    forged.session.id = a.id;
    writeFileSync(path.join(aDir, "checkpoints", `${b1.id}.json`), JSON.stringify(forged));
    await refused(b1.id);
    expect(readTree(bDir)).toEqual(bObjects);
    // A's own manifests, naming another session, or filed under another of A's checkpoints.
    const a1File = path.join(aDir, "checkpoints", `${(await get(`/sessions/${a.id}`)).body.checkpoint.id}.json`);
    writeFileSync(a0File, JSON.stringify({ ...JSON.parse(a0Text), session: { ...JSON.parse(a0Text).session, id: b.id } }));
    await refused(a0.id);
    copyFileSync(a1File, a0File);
    await refused(a0.id);

    // A's own checkpoint, but one block, or the native object, changed in place (same length).
    writeFileSync(a0File, a0Text);
    const block = path.join(aDir, "blocks", readdirSync(path.join(aDir, "blocks"))[0]!);
    const blockText = readFileSync(block, "utf8");
    writeFileSync(block, blockText.replace("a zero", "A ZERO"));
    await refused(a0.id);
    writeFileSync(block, blockText);
    const native = path.join(aDir, "native", `${a0.id}.ndjson`);
    const nativeText = readFileSync(native, "utf8");
    writeFileSync(native, nativeText.replace("a zero", "A ZERO"));
    await refused(a0.id);
    // …nor by editing the manifest to match: its hash dropped, its offset moved inside an event, a
    // checkpoint dropped. The session's own record of its checkpoints says otherwise.
    const edited = (edit: (m: any) => void) => {
      const m = JSON.parse(a0Text);
      edit(m);
      writeFileSync(a0File, JSON.stringify(m));
    };
    edited((m) => delete m.checkpoints[0].sha256);
    await refused(a0.id);
    writeFileSync(native, nativeText);
    edited((m) => {
      m.checkpoint.offset -= 3;
      m.checkpoints[0].offset -= 3;
    });
    await refused(a0.id);
    const a1Manifest = JSON.parse(readFileSync(a1File, "utf8"));
    writeFileSync(a1File, JSON.stringify({ ...a1Manifest, checkpoints: a1Manifest.checkpoints.slice(1) }));
    expectApiError(await post(`/sessions/${a.id}/restore`, { checkpoint: a1Manifest.checkpoint.id }), 500, "service_error");
    writeFileSync(a1File, JSON.stringify(a1Manifest));
    writeFileSync(a0File, a0Text);

    // Untouched, the same restore works, and B restores from its own objects.
    expect((await post(`/sessions/${a.id}/restore`, { checkpoint: a0.id })).body.checkpoint).toEqual(a0);
    expect((await post(`/sessions/${b.id}/restore`, { checkpoint: b1.id })).body.checkpoint).toEqual(b1);
    a.sse.close();
    b.sse.close();
  });

  it("a rebind reaches storage: sync is pending until latest.json carries the new executor", async () => {
    const job = { name: "job", description: "a job the executor runs", input_schema: { type: "object" } };
    const first = await registerExecutor(stack.url, TOKEN, { binding: "jobs", tools: [job] });
    expect(first.status).toBe(201);
    const created = await post("/sessions", { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [], bindings: [{ alias: "jobs", executor: first.body.id }] } });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect((await post(`/sessions/${id}/flush`)).body.pending).toBe(false);
    const second = await registerExecutor(stack.url, TOKEN, { binding: "jobs", tools: [job], session: id });
    expect(second.status).toBe(201);
    expect((await get(`/sessions/${id}/sync`)).body.pending).toBe(true);
    expect((await post(`/sessions/${id}/flush`)).body.pending).toBe(false);
    const latest = JSON.parse(sessionObjects(id).get("latest.json")!.toString());
    expect(latest.session.config.bindings).toEqual([{ alias: "jobs", executor: second.body.id }]);
    expect(latest.session.bindings).toEqual([expect.objectContaining({ alias: "jobs", executor: second.body.id })]);
  });

  it("restore of a running session is 409 conflict; of a closed one too", async () => {
    const s = await createSession(stack.url);
    const c1 = await turn(stack.url, s, "first");
    await post(`/sessions/${s.id}/flush`);
    await post(`/sessions/${s.id}/events`, { type: "user.message", text: "[[hang]]" });
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "running");
    expectApiError(await post(`/sessions/${s.id}/restore`, { checkpoint: c1.id }), 409, "conflict");
    await post(`/sessions/${s.id}/close`);
    expectApiError(await post(`/sessions/${s.id}/restore`, { checkpoint: c1.id }), 409, "conflict");
  });

  it("a lookup of an id that exists nowhere writes nothing", async () => {
    const objects = path.join(stack.dir, "data", "worker");
    // The objects' databases. Not their `-wal`/`-shm` files: those come and go as an object of an
    // earlier test wakes (an upload round every second here) or closes, whatever this test does.
    const databases = () => {
      const out: string[] = [];
      const walk = (d: string) => {
        for (const e of readdirSync(d, { withFileTypes: true })) {
          if (e.isDirectory()) walk(path.join(d, e.name));
          else if (!/-(wal|shm|journal)$/.test(e.name)) out.push(path.relative(objects, path.join(d, e.name)));
        }
      };
      walk(objects);
      return out.sort();
    };
    const before = databases();
    for (let i = 0; i < 50; i++) {
      const id = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
      expectApiError(await get(`/sessions/${id}`), 404, "not_found");
      expectApiError(await get(`/sessions/${id}/events`), 404, "not_found");
    }
    expect(databases()).toEqual(before);
  });

  it("loads a session from storage on a deployment with an empty local state, and everything after it works", async () => {
    const s = await createSession(stack.url);
    await turn(stack.url, s, "remember alpha");
    // A keyed message: its key lasts the session's life, on whichever deployment holds it.
    const keyed = { type: "user.message", text: "remember beta", key: "beta-1" };
    const beta = await post(`/sessions/${s.id}/events`, keyed);
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === beta.body.id);
    const before = (await call(stack.url, "GET", `/sessions/${s.id}`, { token: TOKEN })).body;
    expect((await post(`/sessions/${s.id}/flush`)).body.pending).toBe(false);
    const events = await allEvents(stack.url, s.id);
    s.sse.close();

    const fresh = await startStack({ config: stackConfig(provider, persistence), env: baseEnv });
    try {
      const got = await call(fresh.url, "GET", `/sessions/${s.id}`, { token: TOKEN });
      expect(got.status).toBe(200);
      // Nothing changed after the stored history: the session is as it was, updated_at included.
      expect(got.body).toEqual(before);
      const loaded = await allEvents(fresh.url, s.id);
      expect(uncursored(loaded)).toEqual(uncursored(events));
      const list = await call(fresh.url, "GET", "/sessions", { token: TOKEN });
      expect(list.body.sessions.map((x: { id: string }) => x.id)).toContain(s.id);
      // The loaded session knows the key: the same message returns the original event and queues
      // nothing; other text under it is a conflict.
      const again = await call(fresh.url, "POST", `/sessions/${s.id}/events`, { token: TOKEN, body: keyed });
      expect(again.status).toBe(202);
      expect(again.body.id).toBe(beta.body.id);
      expectApiError(await call(fresh.url, "POST", `/sessions/${s.id}/events`, { token: TOKEN, body: { ...keyed, text: "other" } }), 409, "conflict");
      expect(uncursored(await allEvents(fresh.url, s.id))).toEqual(uncursored(events));
      const sse = await openSse(`${fresh.url}/sessions/${s.id}/events`, { token: TOKEN, lastEventId: events.at(-1)!.cursor });
      await turn(fresh.url, { id: s.id, sse }, "what did I say?");
      sse.close();
      expect(lastConversation()).toEqual([
        "user:remember alpha",
        "assistant:echo: remember alpha",
        "user:remember beta",
        "assistant:echo: remember beta",
        "user:what did I say?",
      ]);
    } finally {
      await fresh.stop();
    }
  });

  it("after a load, cursors into history that storage does not have give 409, also once new events take their positions", async () => {
    const s = await createSession(stack.url);
    await turn(stack.url, s, "kept");
    const kept = await allEvents(stack.url, s.id);
    // A turn that never completes: its events come after the last checkpoint, so a load drops them.
    const hung = await post(`/sessions/${s.id}/events`, { type: "user.message", text: "[[hang]]" });
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "running");
    await post(`/sessions/${s.id}/events`, { type: "user.interrupt" });
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "interrupted");
    expect((await post(`/sessions/${s.id}/flush`)).body.pending).toBe(false);
    const lost = (await allEvents(stack.url, s.id)).slice(kept.length);
    expect(lost[0]).toMatchObject({ id: hung.body.id });
    s.sse.close();

    const fresh = await startStack({ config: stackConfig(provider, persistence), env: baseEnv });
    try {
      // The stored checkpoint was published after the hung turn began (with the status running or
      // interrupted), so the load changes the status storage recorded: updated_at says when.
      const loaded = (await call(fresh.url, "GET", `/sessions/${s.id}`, { token: TOKEN })).body;
      expect(loaded.status).toBe("idle");
      expect(loaded.updated_at > (lost.at(-1) as { time?: string }).time!).toBe(true);
      const live = await openSse(`${fresh.url}/sessions/${s.id}/events`, { token: TOKEN, lastEventId: kept.at(-1)!.cursor });
      await turn(fresh.url, { id: s.id, sse: live }, "after the load");
      live.close();
      const now = await allEvents(fresh.url, s.id);
      expect(now.length).toBeGreaterThanOrEqual(lost.length);
      for (const e of lost) expectApiError(await call(fresh.url, "GET", `/sessions/${s.id}/events?after=${e.cursor}`, { token: TOKEN }), 409, "cursor_unavailable");
      // A cursor of the stored history still reads on, into the events made after the load.
      const page = await call(fresh.url, "GET", `/sessions/${s.id}/events?after=${kept.at(-1)!.cursor}`, { token: TOKEN });
      expect(page.body.events.map((e: { id: string }) => e.id)).toEqual(now.slice(kept.length).map((e) => e.id));
      expect(page.body.events[0]).toMatchObject({ type: "user.message", data: { text: "after the load" } });
    } finally {
      await fresh.stop();
    }
  });

  it("what a load finds past its checkpoint is deleted at the loaded copy's first checkpoint, unless a checkpoint published meanwhile names it; that checkpoint stays restorable", async () => {
    const s = await createSession(stack.url);
    const c1 = await turn(stack.url, s, "one");
    const c2 = await turn(stack.url, s, "two");
    // A turn cut off after c2: its blocks are uploaded, and no checkpoint's manifest names them.
    await post(`/sessions/${s.id}/events`, { type: "user.message", text: "[[hang]]" });
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "running");
    await post(`/sessions/${s.id}/events`, { type: "user.interrupt" });
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "interrupted");
    expect((await post(`/sessions/${s.id}/flush`)).body.pending).toBe(false);
    s.sse.close();
    // Storage as the other deployment had left it when this one loads the session: latest.json is
    // c1's manifest, c2's is not published yet (it comes back below, as if published meanwhile),
    // plus a native object whose manifest was never written and a file the layout does not name.
    const folder = path.join(store, [...readTree(store).keys()].find((k) => k.includes(`/${s.id}/latest.json`))!.replace(/latest\.json$/, ""));
    const c2File = path.join(folder, `checkpoints/${c2.id}.json`);
    const c2Manifest = readFileSync(c2File);
    copyFileSync(path.join(folder, `checkpoints/${c1.id}.json`), path.join(folder, "latest.json"));
    rmSync(c2File);
    writeFileSync(path.join(folder, `native/${"e".repeat(32)}.ndjson`), "{}\n");
    writeFileSync(path.join(folder, "notes.txt"), "kept");
    const before = sessionObjects(s.id);
    const named = (m: Buffer) => {
      const parsed = JSON.parse(m.toString()) as { history: { key: string }[]; checkpoints: { native: string }[] };
      return [...parsed.history.map((b) => b.key), ...parsed.checkpoints.map((c) => c.native)].map((k) => k.slice(k.indexOf(`/${s.id}/`) + s.id.length + 2));
    };
    const needed = new Set([...named(before.get(`checkpoints/${c1.id}.json`)!), ...named(c2Manifest)]);
    const tail = [...before.keys()].filter((k) => k.startsWith("blocks/") && !needed.has(k));
    expect(tail.length).toBeGreaterThan(0);
    const gone = new Set([...tail, `native/${"e".repeat(32)}.ndjson`]);

    const fresh = await startStack({ config: stackConfig(provider, persistence), env: baseEnv });
    try {
      expect((await call(fresh.url, "GET", `/sessions/${s.id}`, { token: TOKEN })).body).toMatchObject({ status: "idle", checkpoint: c1 });
      // A load alone deletes nothing: the deployment that wrote those objects may still hold the session.
      expect((await call(fresh.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN })).body.pending).toBe(false);
      expect([...before.keys()].filter((k) => !sessionObjects(s.id).has(k))).toEqual([]);
      writeFileSync(c2File, c2Manifest);
      // This copy's first checkpoint: latest.json is its own now, and what no stored manifest names goes.
      const sse = await openSse(`${fresh.url}/sessions/${s.id}/events`, { token: TOKEN });
      await turn(fresh.url, { id: s.id, sse }, "three");
      sse.close();
      expect((await call(fresh.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN })).body.pending).toBe(false);
      const after = sessionObjects(s.id);
      for (const k of [...before.keys(), `checkpoints/${c2.id}.json`]) expect([k, after.has(k)]).toEqual([k, !gone.has(k)]);
      // c2 is still whole in storage, so it can be restored to, and its conversation comes back.
      const r = await call(fresh.url, "POST", `/sessions/${s.id}/restore`, { token: TOKEN, body: { checkpoint: c2.id } });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ status: "idle", checkpoint: c2 });
      const restored = await openSse(`${fresh.url}/sessions/${s.id}/events`, { token: TOKEN });
      await turn(fresh.url, { id: s.id, sse: restored }, "four");
      restored.close();
      expect(lastConversation()).toEqual(["user:one", "assistant:echo: one", "user:two", "assistant:echo: two", "user:four"]);
    } finally {
      await fresh.stop();
    }
  });

  it("a closed session loads closed: storage holds its close, and close stays permanent on another deployment", async () => {
    const s = await createSession(stack.url);
    const first = await turn(stack.url, s, "before the close");
    // Closed mid-turn with a message queued behind the running one.
    const hung = await post(`/sessions/${s.id}/events`, { type: "user.message", text: "[[hang]]" });
    await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "running" && f.json.input_id === hung.body.id);
    expect((await post(`/sessions/${s.id}/events`, { type: "user.message", text: "queued" })).status).toBe(202);
    expect((await post(`/sessions/${s.id}/close`)).body).toEqual({ status: "closed" });
    // A session closed before its first turn is stored closed as well.
    const early = await createSession(stack.url);
    expect((await post(`/sessions/${early.id}/close`)).status).toBe(202);
    const cp = (await get(`/sessions/${s.id}`)).body.checkpoint;
    expect(cp.offset).toBeGreaterThan(first.offset);
    for (const x of [s, early]) expect((await post(`/sessions/${x.id}/flush`)).body).toMatchObject({ pending: false });
    const sync = (await get(`/sessions/${s.id}/sync`)).body;
    expect(sync).toMatchObject({ checkpoint: cp.id, resume_offset: sync.history_bytes });
    const events = await allEvents(stack.url, s.id);
    expect(events.at(-1)).toMatchObject({ type: "session.status", data: { status: "closed" } });
    const earlyEvents = await allEvents(stack.url, early.id);
    // Open here, and about to be closed on the other deployment.
    const other = await createSession(stack.url);
    await turn(stack.url, other, "still open here");
    expect((await post(`/sessions/${other.id}/flush`)).body).toMatchObject({ pending: false });
    for (const x of [s, early, other]) x.sse.close();

    const fresh = await startStack({ config: stackConfig(provider, persistence), env: baseEnv });
    try {
      const got = await call(fresh.url, "GET", `/sessions/${s.id}`, { token: TOKEN });
      expect(got.body).toMatchObject({ id: s.id, status: "closed", checkpoint: cp });
      expect(uncursored(await allEvents(fresh.url, s.id))).toEqual(uncursored(events));
      expect((await call(fresh.url, "GET", `/sessions/${early.id}`, { token: TOKEN })).body.status).toBe("closed");
      expect(uncursored(await allEvents(fresh.url, early.id))).toEqual(uncursored(earlyEvents));
      const send = (id: string) => call(fresh.url, "POST", `/sessions/${id}/events`, { token: TOKEN, body: { type: "user.message", text: "again" } });
      for (const id of [s.id, early.id]) expectApiError(await send(id), 409, "conflict");
      expectApiError(await call(fresh.url, "POST", `/sessions/${s.id}/resume`, { token: TOKEN, body: {} }), 409, "conflict");
      expectApiError(await call(fresh.url, "POST", `/sessions/${s.id}/restore`, { token: TOKEN, body: { checkpoint: first.id } }), 409, "conflict");
      const list = await call(fresh.url, "GET", "/sessions", { token: TOKEN });
      expect(list.body.sessions.find((x: { id: string }) => x.id === s.id)?.status).toBe("closed");
      expect(uncursored(await allEvents(fresh.url, s.id))).toEqual(uncursored(events));

      expect((await call(fresh.url, "POST", `/sessions/${other.id}/close`, { token: TOKEN })).status).toBe(202);
      const closedThere = (await call(fresh.url, "POST", `/sessions/${other.id}/flush`, { token: TOKEN })).body;
      expect(closedThere.pending).toBe(false);
      // Restoring the close of another deployment would bring a closed history back as idle.
      expectApiError(await post(`/sessions/${other.id}/restore`, { checkpoint: closedThere.checkpoint }), 409, "conflict");
      expect((await get(`/sessions/${other.id}`)).body.status).toBe("idle");
    } finally {
      await fresh.stop();
    }
  });
});
