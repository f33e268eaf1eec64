/**
 * The SessionObject through its stub (RPC methods returning Results) and its storage through
 * `runInDurableObject`: lifecycle, the event log's record sizes and chunk rows, `log_bytes`, the
 * byte cap of one read, and the summary pushed to the TenantObject.
 */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Event, EventList, Session } from "../../src/shared/api-schema.ts";
import { newId } from "../../src/shared/ids.ts";
import { CHUNK_BYTES, EventLog, MAX_RECORD_BYTES, READ_BYTES, RecordTooLarge, type NewEvent } from "../../src/session/event-log.ts";
import { concatBytes } from "../../src/shared/bytes.ts";
import { SessionState } from "../../src/session/session-state.ts";
import { INDEX_BACKSTOP_MS } from "../../src/session/index-push.ts";
import { GATHER_MS, type TenantObject } from "../../src/tenant/tenant-object.ts";
import type { SessionRow } from "../../src/session/record.ts";
import { appendRecords as append, env, freshSession, ok, type Stub } from "./helpers.ts";

const encoder = new TextEncoder();



/** The NDJSON line of an event as the log stores it: the envelope without `cursor`. */
function lineOf(e: Event): string {
  const { cursor: _, ...rest } = e;
  return JSON.stringify(rest);
}

const TIME = "2026-01-01T00:00:00.000Z";

const appendRecords = (stub: Stub, records: NewEvent[]) => append(stub, records, TIME);

/**
 * An `assistant.message` whose NDJSON line is exactly `bytes` long, its text made of two-byte
 * characters so that chunk boundaries (every CHUNK_BYTES) can fall inside a character.
 */
function recordOfBytes(bytes: number): NewEvent {
  const overhead = encoder.encode(JSON.stringify({ id: "0".repeat(32), type: "assistant.message", time: TIME, data: { text: "" } })).length;
  const room = bytes - overhead;
  const text = "é".repeat(Math.floor(room / 2)) + "a".repeat(room % 2);
  return { type: "assistant.message", data: { text } };
}

function storedRows(stub: Stub, seq: number) {
  return runInDurableObject(stub, (_, state) => {
    const sql = state.storage.sql;
    const row = sql.exec<{ data: string | null; chunks: number; bytes: number }>("SELECT data, chunks, bytes FROM events WHERE seq = ?", seq).one();
    const parts = sql
      .exec<{ part: ArrayBuffer | string }>("SELECT part FROM event_chunks WHERE seq = ? ORDER BY n", seq)
      .toArray()
      .map((p) => (typeof p.part === "string" ? encoder.encode(p.part) : new Uint8Array(p.part)));
    return { row, parts };
  });
}

function logBytes(stub: Stub) {
  return runInDurableObject(stub, (_, state) => state.storage.sql.exec<{ b: number }>("SELECT log_bytes AS b FROM session").one().b);
}


describe("SessionObject lifecycle", () => {
  it("creates a session once; a second create is 409 conflict", async () => {
    const { n, stub } = freshSession();
    const s = ok<Session>(await stub.create(n));
    expect(s).toMatchObject({ id: n.id, harness: "pi", status: "idle", config: n.config, descriptors: [] });
    expect(s.created_at).toBe(s.updated_at);
    expect(await stub.create(n)).toEqual({ ok: false, error: { code: "conflict", message: expect.any(String) } });
    expect(ok<Session>(await stub.get())).toEqual(s);
  });

  it("answers 404 not_found for an object that was never created", async () => {
    const { stub } = freshSession();
    expect(await stub.get()).toMatchObject({ ok: false, error: { code: "not_found" } });
    expect(await stub.readEvents("", 10)).toMatchObject({ ok: false, error: { code: "not_found" } });
    expect(await stub.close()).toMatchObject({ ok: false, error: { code: "not_found" } });
  });

  it("close records one session.status closed without input_id, is permanent, and closing again changes nothing", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    expect(ok(await stub.close())).toEqual({ status: "closed" });
    expect(ok<Session>(await stub.get()).status).toBe("closed");
    expect(ok(await stub.close())).toEqual({ status: "closed" });
    const { events } = ok<EventList>(await stub.readEvents("", 100));
    expect(events.map((e) => [e.type, e.data])).toEqual([["session.status", { status: "closed" }]]);
    expect(events[0]!.input_id).toBeUndefined();
    expect(await stub.send({ type: "user.message", text: "late" })).toMatchObject({ ok: false, error: { code: "conflict" } });
    expect(await stub.resume()).toMatchObject({ ok: false, error: { code: "conflict" } });
  });

  it("close cancels queued inputs: one session.error conflict per input in queue order, then session.status closed", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    const sent = [ok<Event>(await stub.send({ type: "user.message", text: "a" })), ok<Event>(await stub.send({ type: "user.message", text: "b" }))];
    ok(await stub.close());
    const { events } = ok<EventList>(await stub.readEvents("", 100));
    expect(events.map((e) => [e.type, e.input_id, (e.data as { code?: string }).code])).toEqual([
      ["user.message", undefined, undefined],
      ["user.message", undefined, undefined],
      ["session.error", sent[0]!.id, "conflict"],
      ["session.error", sent[1]!.id, "conflict"],
      ["session.status", undefined, undefined],
    ]);
    expect(events.at(-1)!.data).toEqual({ status: "closed" });
  });

  it("readEvents pages by limit and cursor; every retained event carries its cursor", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    const sent = [] as Event[];
    for (const text of ["a", "b", "c"]) sent.push(ok<Event>(await stub.send({ type: "user.message", text })));
    const p1 = ok<EventList>(await stub.readEvents("", 2));
    expect(p1.events).toEqual(sent.slice(0, 2));
    expect(p1.next_cursor).toBe(sent[1]!.cursor);
    const p2 = ok<EventList>(await stub.readEvents(p1.next_cursor, 2));
    expect(p2).toEqual({ events: [sent[2]], next_cursor: sent[2]!.cursor });
    expect(ok<EventList>(await stub.readEvents(p2.next_cursor, 2))).toEqual({ events: [], next_cursor: p2.next_cursor });
    expect(await stub.readEvents(sent[0]!.id, 2)).toMatchObject({ ok: false, error: { code: "cursor_unavailable" } });
  });
});

describe("event log records (retained records are capped at 4 MiB)", () => {
  it("log_bytes grows by each NDJSON line length + 1", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    expect(await logBytes(stub)).toBe(0);
    let expected = 0;
    for (const text of ["plain", "ünïcödé ✓ 😀", "line\nbreak\u2028"]) {
      const e = ok<Event>(await stub.send({ type: "user.message", text }));
      expected += encoder.encode(lineOf(e)).length + 1;
      expect(await logBytes(stub)).toBe(expected);
    }
    ok(await stub.close());
    const { events } = ok<EventList>(await stub.readEvents("", 100));
    const total = events.reduce((sum, e) => sum + encoder.encode(lineOf(e)).length + 1, 0);
    expect(await logBytes(stub)).toBe(total);
  });

  it("stores a record just over 1,000,000 bytes in chunk rows and reads it back byte-identical", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    // Odd size: the chunk boundary at 1,000,000 bytes falls inside a two-byte character.
    const size = CHUNK_BYTES + 3;
    const [logged] = await appendRecords(stub, [recordOfBytes(size)]);
    const line = JSON.stringify(logged!.event);
    expect(encoder.encode(line).length).toBe(size);

    const { row, parts } = await storedRows(stub, logged!.seq);
    expect(row).toEqual({ data: null, chunks: 2, bytes: size + 1 });
    expect(parts.map((p) => p.byteLength)).toEqual([CHUNK_BYTES, 3]);
    expect(concatBytes(parts)).toEqual(encoder.encode(line));

    const { events } = ok<EventList>(await stub.readEvents("", 10));
    expect(events).toHaveLength(1);
    expect(lineOf(events[0]!)).toBe(line);
    expect(await logBytes(stub)).toBe(size + 1);
  });

  it("keeps a record of exactly 1,000,000 bytes in its row (no chunks)", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    const [logged] = await appendRecords(stub, [recordOfBytes(CHUNK_BYTES)]);
    const { row, parts } = await storedRows(stub, logged!.seq);
    expect(row.chunks).toBe(0);
    expect(row.data).toBe(JSON.stringify(logged!.event));
    expect(parts).toEqual([]);
  });

  it("stores a record of exactly 4 MiB in chunk rows and reads it back byte-identical", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    const [logged] = await appendRecords(stub, [recordOfBytes(MAX_RECORD_BYTES)]);
    const line = JSON.stringify(logged!.event);
    const { row, parts } = await storedRows(stub, logged!.seq);
    expect(row).toEqual({ data: null, chunks: 5, bytes: MAX_RECORD_BYTES + 1 });
    expect(concatBytes(parts)).toEqual(encoder.encode(line));
    const { events } = ok<EventList>(await stub.readEvents("", 10));
    expect(lineOf(events[0]!)).toBe(line);
  });

  it("refuses a record over 4 MiB and stores nothing of it", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    const [small] = await appendRecords(stub, [recordOfBytes(200)]);
    await expect(appendRecords(stub, [recordOfBytes(MAX_RECORD_BYTES + 1)])).rejects.toThrow(/over 4194304/);
    const after = await runInDurableObject(stub, (_, state) => ({
      events: state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM events").one().n,
      chunks: state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM event_chunks").one().n,
    }));
    expect(after).toEqual({ events: 1, chunks: 0 });
    expect(await logBytes(stub)).toBe(small!.endOffset);
    // The class is exported for callers to tell this refusal apart.
    await expect(
      runInDurableObject(stub, (_, state) => {
        try {
          new EventLog(state.storage.sql).append(recordOfBytes(MAX_RECORD_BYTES + 1), TIME, 0);
          return "appended";
        } catch (e) {
          return e instanceof RecordTooLarge ? "RecordTooLarge" : String(e);
        }
      }),
    ).resolves.toBe("RecordTooLarge");
  });

  it("stops a read at 8 MiB of NDJSON lines, and the next read continues after it", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    // Two lines of 4 MiB - 1 bytes count (with their newlines) exactly 8 MiB: both fit, nothing more.
    const exact = MAX_RECORD_BYTES - 1;
    expect(2 * (exact + 1)).toBe(READ_BYTES);
    const logged = await appendRecords(stub, [recordOfBytes(exact), recordOfBytes(exact), recordOfBytes(200)]);
    const p1 = ok<EventList>(await stub.readEvents("", 100));
    expect(p1.events.map((e) => e.id)).toEqual([logged[0]!.event.id, logged[1]!.event.id]);
    expect(p1.events.map(lineOf)).toEqual([JSON.stringify(logged[0]!.event), JSON.stringify(logged[1]!.event)]);
    const p2 = ok<EventList>(await stub.readEvents(p1.next_cursor, 100));
    expect(p2.events.map((e) => e.id)).toEqual([logged[2]!.event.id]);
  });

  it("returns at least one event per read even when that event alone fills the budget", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    const logged = await appendRecords(stub, [recordOfBytes(MAX_RECORD_BYTES), recordOfBytes(MAX_RECORD_BYTES)]);
    const p1 = ok<EventList>(await stub.readEvents("", 100));
    expect(p1.events.map((e) => e.id)).toEqual([logged[0]!.event.id]);
    const p2 = ok<EventList>(await stub.readEvents(p1.next_cursor, 100));
    expect(p2.events.map((e) => e.id)).toEqual([logged[1]!.event.id]);
    expect(lineOf(p2.events[0]!)).toBe(JSON.stringify(logged[1]!.event));
  });
});

describe("the session row held in memory (SQLite stays the truth)", () => {
  const stored = (stub: Stub) => runInDurableObject(stub, (_, state) => state.storage.sql.exec<SessionRow>("SELECT * FROM session").one());

  it("is right after the object is evicted and restarted, and later changes count on from SQLite", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    ok(await stub.send({ type: "user.message", text: "one" }));
    const before = await stored(stub);
    expect(ok<Session>(await stub.get()).updated_at).toBe(before.updated_at);
    await evictDurableObject(stub);
    expect(ok<Session>(await stub.get()).updated_at).toBe(before.updated_at);
    ok(await stub.send({ type: "user.message", text: "two" }));
    const after = await stored(stub);
    expect(after.version).toBe(before.version + 1);
    expect(after.log_bytes).toBeGreaterThan(before.log_bytes);
    ok(await stub.close());
    await evictDurableObject(stub);
    expect(ok<Session>(await stub.get()).status).toBe("closed");
    expect((await stored(stub)).status).toBe("closed");
  });

  it("is put back when a transaction rolls back, so a value the rollback undid is never served", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    const seen = await runInDurableObject(stub, (_, state) => {
      const s = new SessionState(state.storage);
      const version = s.require().version;
      expect(() =>
        s.storage.transactionSync(() => {
          s.set({ status: "failed", version: version + 5 });
          expect(s.require().status).toBe("failed");
          throw new Error("rolled back");
        }),
      ).toThrow("rolled back");
      return { cached: s.require(), version };
    });
    expect(seen.cached.status).toBe("idle");
    expect(seen.cached.version).toBe(seen.version);
    expect(ok<Session>(await stub.get()).status).toBe("idle");
    // `indexed_version` is the one column stored with the next write (an older value only repeats a push).
    const { indexed_version: _, ...row } = await stored(stub);
    const { indexed_version: __, ...cached } = seen.cached;
    expect(row).toEqual(cached);
  });

  it("a nested transaction that rolls back undoes only its own columns; the outer one's are written at its end", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    const seen = await runInDurableObject(stub, (_, state) => {
      const s = new SessionState(state.storage);
      const before = s.require();
      s.storage.transactionSync(() => {
        s.set({ down_seq: before.down_seq + 1 });
        expect(() =>
          s.storage.transactionSync(() => {
            s.set({ up_seq: before.up_seq + 7, down_seq: before.down_seq + 9 });
            throw new Error("inner rolled back");
          }),
        ).toThrow("inner rolled back");
        s.set({ up_seq: before.up_seq + 1 });
      });
      return { before, cached: s.require() };
    });
    const row = await stored(stub);
    expect([row.up_seq, row.down_seq]).toEqual([seen.before.up_seq + 1, seen.before.down_seq + 1]);
    expect(seen.cached).toEqual(row);
  });

  it("follows writes that bypass set (a raw UPDATE through the session storage)", async () => {
    const { n, stub } = freshSession();
    ok(await stub.create(n));
    ok(await stub.get()); // the object has read (and holds) its row
    await runInDurableObject(stub, (_, state) => {
      new SessionState(state.storage).storage.sql.exec("UPDATE session SET status = 'failed'");
    });
    expect(ok<Session>(await stub.get()).status).toBe("failed");
  });
});

describe("tenant index (GET /sessions is served by the TenantObject)", () => {
  // Session[] loses its type through the RPC stub (see `ok` in helpers.ts), so it is named here.
  const list = async (tenant: string) => ((await env.TENANTS.getByName(tenant).list("", 1000)) as unknown as { sessions: Session[] }).sessions;

  it("lists a created session, and its latest status after close", async () => {
    const tenant = `idx-${newId()}`;
    const { n, stub } = freshSession({ tenant });
    const created = ok<Session>(await stub.create(n));
    expect(await list(tenant)).toEqual([created]);
    ok(await stub.close());
    const after = await list(tenant);
    expect(after).toHaveLength(1);
    expect(after[0]).toEqual(ok<Session>(await stub.get()));
    expect(after[0]!.status).toBe("closed");
  });

  it("coalesces pushes nobody waits on within the push interval into one at its end, with the alarm armed as a backstop; close is pushed at once", async () => {
    const tenant = `idx-${newId()}`;
    const { n, stub } = freshSession({ tenant });
    const created = ok<Session>(await stub.create(n));
    // Two messages right after the create: inside the interval, left to the instance's timer.
    ok(await stub.send({ type: "user.message", text: "one" }));
    ok(await stub.send({ type: "user.message", text: "two" }));
    const now = ok<Session>(await stub.get());
    expect(now.updated_at > created.updated_at).toBe(true);
    // The object's alarm comes within INDEX_BACKSTOP_MS in case the instance goes before its timer.
    const alarm = await runInDurableObject(stub, (_, state) => state.storage.getAlarm());
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeLessThanOrEqual(Date.now() + INDEX_BACKSTOP_MS);
    // The runtime lets the instance's timer run before it evicts it: the list shows the latest row
    // without the alarm, and the alarm then finds nothing owed.
    await evictDurableObject(stub);
    expect(await list(tenant)).toEqual([now]);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await list(tenant)).toEqual([now]);
    // A close is answered only once the list shows it, interval or not.
    ok(await stub.close());
    expect((await list(tenant))[0]!.status).toBe("closed");
    expect(await list(tenant)).toEqual([ok<Session>(await stub.get())]);
  });

  it("ignores a push older than the version it holds", async () => {
    const tenant = `idx-${newId()}`;
    const index = env.TENANTS.getByName(tenant);
    const id = newId();
    const v = (status: Session["status"]) =>
      JSON.stringify({ id, harness: "pi", config: { model: "openai/m", tools: [] }, status, created_at: TIME, updated_at: TIME, descriptors: [] } satisfies Session);
    await index.upsert(id, 3, v("closed"));
    await index.upsert(id, 2, v("idle"));
    await index.upsert(id, 3, v("running"));
    expect(((await index.list("", 10)) as unknown as { sessions: Session[] }).sessions.map((s) => s.status)).toEqual(["closed"]);
  });

  it("writes the pushes gathered within GATHER_MS together when the window ends, each session's newest, and answers each once written", async () => {
    const index = env.TENANTS.getByName(`idx-${newId()}`);
    const [a, b] = [newId(), newId()].sort();
    const v = (id: string, status: Session["status"]) =>
      JSON.stringify({ id, harness: "pi", config: { model: "openai/m", tools: [] }, status, created_at: TIME, updated_at: TIME, descriptors: [] } satisfies Session);
    const seen = await runInDurableObject(index, async (o: TenantObject) => {
      // From before the first push: its window's timer starts with it.
      const t0 = Date.now();
      const gathered = [o.gather(a!, 2, v(a!, "running")), o.gather(b!, 5, v(b!, "idle")), o.gather(a!, 4, v(a!, "idle")), o.gather(a!, 3, v(a!, "closed"))];
      const before = o.list("", 10).sessions;
      await Promise.all(gathered);
      return { before, waited: Date.now() - t0, after: o.list("", 10).sessions };
    });
    expect(seen.before).toEqual([]);
    expect(seen.waited).toBeGreaterThanOrEqual(GATHER_MS);
    expect(seen.after.map((s) => [s.id, s.status])).toEqual([
      [a, "idle"],
      [b, "idle"],
    ]);
  });
});
