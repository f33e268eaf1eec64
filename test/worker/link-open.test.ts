/**
 * A lease's open at the SessionObject (src/session/open-message.ts, runner-link.ts): the session's
 * native state reaches the runner-host whole, in `native` parts of at most 8 MiB as sent, and the
 * link stores each part as the range of records it carries — so no stored row nears the
 * platform's row cap, whatever the state's size — and a reconnect before the ack resends the
 * same parts. An open, or a turn's `run`, that cannot be stored fails the waiting input with
 * `service_error` and logs why. The test plays the runner-host.
 */
import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { LinkDown } from "../../src/shared/runner-protocol.ts";
import type { Event } from "../../src/shared/api-schema.ts";
import { api, createSession, sendMessage, sessionStub, sseReader } from "./helpers.ts";
import { closeLinks, link, runnerHost } from "./link-helpers.ts";

afterEach(closeLinks);

/** ~9 MiB of small records: more than one part, and more than a row may hold (the cap is 2 MB on the platform). */
const RECORDS = 30_000;
const record = (i: number) => ({ role: i % 2 ? "assistant" : "user", i, text: "x".repeat(280) });


/** The session's events over SSE, up to its `session.status failed`. */
async function untilFailed(id: string): Promise<Event[]> {
  const stream = sseReader((await api(`/sessions/${id}/events`, { headers: { Accept: "text/event-stream" } })).body!);
  const seen: Event[] = [];
  for (;;) {
    const f = await stream.next("the session's events up to failed");
    if (!f?.data) continue;
    const e = JSON.parse(f.data) as Event;
    seen.push(e);
    if (e.type === "session.status" && e.data.status === "failed") break;
  }
  await stream.cancel();
  return seen;
}

/** Makes the session's link refuse to store a message of type `t`, as a row past the platform's cap is refused. */
const refuseStoring = (id: string, t: string) =>
  runInDurableObject(sessionStub(id), (_, state) =>
    state.storage.sql.exec(`CREATE TRIGGER refuse_${t} BEFORE INSERT ON link_out WHEN NEW.body LIKE '{"t":"${t}"%' BEGIN SELECT RAISE(ABORT, 'string or blob too big'); END`),
  );

/**
 * A session whose link refuses to store messages of type `t` gets its message, is placed and
 * opened (as far as `t` lets it); then the message fails with `service_error` `message`, and an
 * error line starting with `logged` says why.
 */
async function expectFailedWhenRefused(t: "open" | "run", message: string, logged: string): Promise<void> {
  const lines: string[] = [];
  vi.spyOn(console, "error").mockImplementation((line: string) => void lines.push(line));
  try {
    const control = await runnerHost();
    const s = await createSession();
    await refuseStoring(s.id, t);
    const input = await sendMessage(s.id, "hello");
    const attach = await control.next((m) => m.t === "attach" && m.session?.startsWith(s.id) === true, "the attach order");
    const l = await link(s.id, attach.lease!);
    await l.box.next((m) => m.t === "ack", "the object's ack on accept");
    l.send({ t: "hello", down: 0 });
    if (t === "run") {
      await l.box.next((m) => m.t === "open", "open");
      l.send({ t: "ack", down: 1 });
      l.send({ t: "opened", seq: 1 });
    }
    const seen = await untilFailed(s.id);
    expect(seen.filter((e) => e.type === "session.error")).toMatchObject([{ input_id: input.id, data: { code: "service_error", message } }]);
    const line = lines.map((x) => JSON.parse(x) as Record<string, string>).find((x) => x.msg?.startsWith(logged));
    expect(line).toMatchObject({ level: "error", session_id: s.id, error: expect.stringContaining("string or blob too big") });
  } finally {
    vi.restoreAllMocks();
  }
}

describe("a lease's open", () => {
  it("sends a native state of many small records whole, in parts of at most 8 MiB, stores only their ranges, and resends the same parts after a reconnect", async () => {
    const control = await runnerHost();
    const s = await createSession();
    await runInDurableObject(sessionStub(s.id), (_, state) => {
      for (let i = 1; i <= RECORDS; i++) {
        const text = JSON.stringify(record(i));
        state.storage.sql.exec("INSERT INTO native (record, bytes) VALUES (?, ?)", text, new TextEncoder().encode(text).byteLength);
      }
    });
    await sendMessage(s.id, "hello again");
    const attach = await control.next((m) => m.t === "attach" && m.session?.startsWith(s.id) === true, "the attach order");

    const opened = async () => {
      const l = await link(s.id, attach.lease!);
      await l.box.next((m) => m.t === "ack", "the object's ack on accept");
      l.send({ t: "hello", down: 0 });
      const open = (await l.box.next((m) => m.t === "open", "open")) as Extract<LinkDown, { t: "open" }>;
      await l.box.next((m) => m.t === "native" && m.seq === 1 + open.native_parts, "the last native part");
      return { l, open, parts: [...l.box.got.filter((m) => m.t === "native").map((m) => JSON.stringify(m))] };
    };

    const first = await opened();
    expect(first.open.native_parts).toBe(2);
    const sizes = first.parts.map((p) => new TextEncoder().encode(p).byteLength);
    for (const size of sizes) expect(size).toBeLessThanOrEqual(8 * 1024 * 1024);
    const records = first.parts.flatMap((p) => (JSON.parse(p) as { records: unknown[] }).records);
    expect(records).toHaveLength(RECORDS);
    expect(records[0]).toEqual(record(1));
    expect(records.at(-1)).toEqual(record(RECORDS));
    const stored = await runInDurableObject(sessionStub(s.id), (_, state) => state.storage.sql.exec<{ n: number; longest: number }>("SELECT COUNT(*) AS n, MAX(length(body)) AS longest FROM link_out").one());
    expect(stored.n).toBe(3);
    expect(stored.longest).toBeLessThan(1024);

    // Dropped before the runner-host acked anything: the redial's hello gets the same open and parts.
    first.l.ws.close(1000, "dropped");
    const second = await opened();
    expect(second.open).toEqual(first.open);
    expect(second.parts).toEqual(first.parts);
  });

  it("that cannot be stored fails the waiting input with service_error and says why in the log, instead of leaving it queued for good", async () => {
    // Any failure to store the open's messages (a row past the platform's cap, a full disk) does this.
    await expectFailedWhenRefused("open", "the session could not be opened on a runner-host", "session could not be opened");
  });

  it("whose turn's run cannot be stored fails that input with service_error and says why in the log", async () => {
    await expectFailedWhenRefused("run", "the turn could not be started", "a turn could not start");
  });
});
