/**
 * The runner link's `batch` frame at the SessionObject (src/shared/runner-protocol.ts): several
 * numbered messages in one frame are applied once each, in one transaction, and acked once; after
 * a link drop the runner-host resends what it has not seen acked, and nothing is lost or doubled.
 * Live messages and acks may ride in a frame; they are published or applied in their place. A
 * `detached` that says `yielded` (a make-room drop) queues a turn the runner-host never ran again.
 * A message sent while the link is lost waits queued: for the runner-host to dial back, or for the
 * grace to run out and a new placement.
 * The test plays the runner-host: a control socket at the pool, then the session's link socket.
 */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_BATCH, type LinkDown, type LinkUp, type NumberedUp } from "../../src/shared/runner-protocol.ts";
import type { Event } from "../../src/shared/api-schema.ts";
import { LINK_GRACE_MS } from "../../src/session/link-grace.ts";
import { api, createSession, sendMessage, sessionStub, withTimeout } from "./helpers.ts";
import { closeLinks, link, openedLink, runnerHost, USAGE } from "./link-helpers.ts";

afterEach(closeLinks);
const events = async (id: string) => ((await (await api(`/sessions/${id}/events?limit=1000`)).json()) as { events: Event[] }).events;

describe("runner link batch frames", () => {
  it("a batch is applied once and acked once; resent after a link drop, with one new message, nothing is lost or doubled", async () => {
    const control = await runnerHost();
    const s = await createSession();
    const input = await sendMessage(s.id, "hi");
    const attach = await control.next((m) => m.t === "attach" && m.session?.startsWith(s.id) === true, "the attach order");
    const lease = attach.lease!;

    const first = await openedLink(s.id, lease);
    const run = first.run;
    expect(run.turn).toBe(input.id);
    first.send({ t: "ack", down: run.seq });

    const assistant: NumberedUp = { t: "assistant", seq: 2, turn: input.id, text: "hello", usage: USAGE, stop_reason: "stop" };
    const native: NumberedUp = { t: "native", seq: 3, records: [{ role: "assistant", text: "hello" }] };
    first.send({ t: "batch", msgs: [assistant, native] });
    expect(await first.box.next((m) => m.t === "ack" && m.up === 3, "one ack for the batch")).toEqual({ t: "ack", up: 3 });
    expect(first.box.got.filter((m) => m.t === "ack" && m.up > 1)).toEqual([{ t: "ack", up: 3 }]); // none for seq 2 alone

    // The link drops before the runner-host read that ack: it redials and resends from seq 2, now
    // with the turn's end in the same frame.
    first.ws.close(1000, "dropped");
    const second = await link(s.id, lease);
    expect(await second.box.next((m) => m.t === "ack", "the ack on accept")).toEqual({ t: "ack", up: 3 });
    second.send({ t: "hello", down: run.seq });
    // Live messages and an ack may ride in a frame too; they are never stored.
    second.send({
      t: "batch",
      msgs: [
        { t: "ack", down: run.seq },
        { t: "delta", turn: input.id, text: "hel" },
        assistant,
        native,
        { t: "turn_end", seq: 4, turn: input.id, status: "completed" },
      ],
    });
    await second.box.next((m) => m.t === "ack" && m.up === 4, "the ack of the resent batch");

    const log = await events(s.id);
    expect(log.map((e) => [e.type, e.data.status ?? e.data.text])).toEqual([
      ["user.message", "hi"],
      ["session.status", "running"],
      ["assistant.message", "hello"],
      ["session.status", "idle"],
    ]);
    // The native records were stored once.
    const nativeRows = await runInDurableObject(sessionStub(s.id), (_, state) => state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM native").one().n);
    expect(nativeRows).toBe(1);
  });

  it("a detached that says yielded queues the turn it never ran again: no error, and the turn runs on the next placement", async () => {
    const control = await runnerHost();
    const s = await createSession();
    const input = await sendMessage(s.id, "hi");
    const attach = await control.next((m) => m.t === "attach" && m.session?.startsWith(s.id) === true, "the attach order");
    const first = await openedLink(s.id, attach.lease!);
    expect(first.run.turn).toBe(input.id);
    // The runner-host had chosen this session to make room before the run reached it.
    first.send({ t: "detached", seq: 2, reason: "dropped to make room (limits.loaded)", yielded: true });
    const again = await control.next((m) => m.t === "attach" && m.session?.startsWith(s.id) === true && m.lease! > attach.lease!, "a new placement");
    const second = await openedLink(s.id, again.lease!);
    expect(second.run.turn).toBe(input.id);
    second.send({ t: "turn_end", seq: 2, turn: input.id, status: "completed" });
    await second.box.next((m) => m.t === "ack" && m.up === 2, "the turn end's ack");
    expect((await events(s.id)).map((e) => [e.type, e.data.status ?? e.data.text])).toEqual([
      ["user.message", "hi"],
      ["session.status", "running"],
      ["session.status", "idle"],
    ]);
  });

  it(`takes a batch of MAX_BATCH (${MAX_BATCH}) items and refuses one item more: the link is closed`, async () => {
    const control = await runnerHost();
    const s = await createSession();
    await sendMessage(s.id, "hi");
    const attach = await control.next((m) => m.t === "attach" && m.session?.startsWith(s.id) === true, "the attach order");
    const fill = (n: number): LinkUp[] => Array.from({ length: n }, () => ({ t: "ack", down: 0 }) as LinkUp);
    const l = await link(s.id, attach.lease!);
    await l.box.next((m) => m.t === "ack", "the ack on accept");
    l.send({ t: "hello", down: 0 });
    await l.box.next((m) => m.t === "open", "open");
    l.send({ t: "batch", msgs: [{ t: "opened", seq: 1 }, ...fill(MAX_BATCH - 1)] } as LinkUp);
    await l.box.next((m) => m.t === "ack" && m.up === 1, "the ack of a full batch");
    const closed = new Promise<number>((resolve) => l.ws.addEventListener("close", (e) => resolve(e.code)));
    l.send({ t: "batch", msgs: [{ t: "detached", seq: 2, reason: "x" }, ...fill(MAX_BATCH)] } as LinkUp);
    expect(await withTimeout(closed, 5_000, "the close")).toBe(1008);
    // The refused frame applied nothing: its numbered message was never taken.
    const upSeq = await runInDurableObject(sessionStub(s.id), (_, state) => state.storage.sql.exec<{ up_seq: number }>("SELECT up_seq FROM session").one().up_seq);
    expect(upSeq).toBe(1);
  });

  it("refuses a batch whose seqs are not consecutive (strict contract): the link is closed", async () => {
    const control = await runnerHost();
    const s = await createSession();
    await sendMessage(s.id, "hi");
    const attach = await control.next((m) => m.t === "attach" && m.session?.startsWith(s.id) === true, "the attach order");
    const l = await link(s.id, attach.lease!);
    await l.box.next((m) => m.t === "ack", "the ack on accept");
    const closed = new Promise<number>((resolve) => l.ws.addEventListener("close", (e) => resolve(e.code)));
    l.send({ t: "batch", msgs: [{ t: "opened", seq: 1 }, { t: "detached", seq: 3, reason: "x" }] } as LinkUp);
    expect(await withTimeout(closed, 5_000, "the close")).toBe(1008);
  });
});

describe("a lost runner link", () => {
  /** A session whose first turn ran on a link that is then lost (its runner-host's process died). */
  async function lostAfterOneTurn() {
    const control = await runnerHost();
    const s = await createSession();
    const one = await sendMessage(s.id, "one");
    const attach = await control.next((m) => m.t === "attach" && m.session?.startsWith(s.id) === true, "the attach order");
    const l = await openedLink(s.id, attach.lease!);
    l.send({ t: "turn_end", seq: 2, turn: one.id, status: "completed" });
    await l.box.next((m) => m.t === "ack" && m.up === 2, "the turn end's ack");
    await runInDurableObject(sessionStub(s.id), async (instance, state) => {
      for (const ws of state.getWebSockets("runner")) {
        ws.close(1011, "runner-host gone");
        await instance.webSocketClose(ws, 1011);
      }
    });
    return { control, s, lease: attach.lease! };
  }

  it("a message sent meanwhile waits queued (no running, no error) and runs when the runner-host dials back", async () => {
    const { s, lease } = await lostAfterOneTurn();
    const two = await sendMessage(s.id, "two");
    expect((await events(s.id)).map((e) => e.type).slice(-2)).toEqual(["session.status", "user.message"]);
    const back = await link(s.id, lease);
    await back.box.next((m) => m.t === "ack", "the ack on accept");
    back.send({ t: "hello", down: 2 });
    const run = (await back.box.next((m) => m.t === "run", "the waiting turn's run")) as Extract<LinkDown, { t: "run" }>;
    expect(run).toMatchObject({ turn: two.id, text: "two" });
  });

  it("a message sent meanwhile is placed anew once the grace runs out, with no error", async () => {
    const { control, s, lease } = await lostAfterOneTurn();
    const two = await sendMessage(s.id, "two");
    const stub = sessionStub(s.id);
    await runInDurableObject(stub, (_, state) => state.storage.sql.exec("UPDATE session SET link_lost_at = ?", Date.now() - LINK_GRACE_MS - 1));
    await evictDurableObject(stub); // the instance keeps its row in memory; the next one reads the moved-back loss
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const again = await control.next((m) => m.t === "attach" && m.session?.startsWith(s.id) === true && m.lease! > lease, "a new placement");
    const next = await openedLink(s.id, again.lease!);
    expect(next.run).toMatchObject({ turn: two.id, text: "two" });
    expect((await events(s.id)).filter((e) => e.type === "session.error")).toEqual([]);
  });
});
