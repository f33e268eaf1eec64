/**
 * The session link under a flaky object side: dropped sockets mid-turn, lost acks, duplicate and
 * out-of-order down messages, refused upgrades and an ended lease.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { LinkUp, NumberedUp } from "../../src/shared/runner-protocol.ts";
import type { FakeSession } from "./runner-fake-service.ts";
import { opened, Rig, SLOW, turnEnd } from "./runner-setup.ts";

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.stop();
  rig = undefined;
});

/** Applied numbered seqs must be exactly 1..n. */
function expectContiguous(fake: FakeSession): void {
  const seqs = fake.ups.items.flatMap((m) => ("seq" in m ? [m.seq] : []));
  expect(seqs).toEqual(seqs.map((_, i) => i + 1));
  expect(fake.errors).toEqual([]);
}

const count = (fake: FakeSession, t: LinkUp["t"]) => fake.ups.items.filter((m) => m.t === t).length;

describe("runner-host session link", () => {
  it("resends unacked messages after a dropped socket mid-turn; nothing lost or doubled; the turn completes", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-drop");
    await opened(fake);
    fake.autoAck = false; // acks "lost": everything of the turn stays unacked on the runner-host
    const turn = rig.run(fake, `[[tool ${SLOW.name} {}]]`);
    await fake.ups.find((m) => m.t === "tool_call" && m.turn === turn);
    const unacked = rig.host.session("sess-drop")!.link.unacked;
    expect(unacked).toBeGreaterThanOrEqual(4); // native(user), assistant, native(assistant), tool_call
    expect(rig.tools.calls.items).toHaveLength(0); // not dispatched: its tool_call is not acknowledged

    fake.autoAck = true;
    fake.ws!.terminate(); // a deploy, an object restart
    const hello = await fake.hellos.nth(1);
    expect(hello).toEqual({ t: "hello", down: 2 }); // open and run were applied
    // The resent tool_call is acknowledged now, and only then is the tool called.
    const held = await rig.tools.calls.next((c) => c.path === "/slow");
    held.res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ content: [{ type: "text", text: "done" }] }));

    const end = await turnEnd(fake, turn);
    expect(end.status).toBe("completed");
    expect(fake.duplicates).toBe(unacked); // each resent once, applied once
    expect(fake.batches.some((b) => b.length === unacked)).toBe(true); // the resend went as one batch frame
    expectContiguous(fake);
    expect([count(fake, "tool_call"), count(fake, "tool_result"), count(fake, "turn_end")]).toEqual([1, 1, 1]);
  });

  it("sends a turn's final messages (last delta, assistant, native, turn_end) as one batch frame, acked once", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-batch");
    await opened(fake);
    const acksBefore = fake.acks.items.length;
    const turn = rig.run(fake, "[[deltas 5]]");
    const end = await turnEnd(fake, turn);
    expect(end.status).toBe("completed");
    const numbered = fake.turn(turn).filter((m) => "seq" in m);
    const last = fake.batches.at(-1)!;
    // A delta still buffered when the assistant message came rides in the same frame, before it.
    if (last.includes("delta")) expect(last.indexOf("delta")).toBeLessThan(last.indexOf(numbered.find((m) => m.t === "assistant")!.seq));
    expect(last).toContain(end.seq);
    expect(last.length).toBeGreaterThanOrEqual(2);
    expect(numbered.filter((m) => m.t === "assistant" || m.t === "turn_end").every((m) => last.includes(m.seq))).toBe(true);
    expectContiguous(fake);
    // The frame was answered with one ack (the fake acks per frame), not one per message.
    expect(fake.acks.items.length - acksBefore).toBeLessThanOrEqual(2);
  });

  it("keeps what a turn produces while the object is unreachable and delivers it, in order, on reconnect", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-away");
    await opened(fake);
    const turn = rig.run(fake, `[[tool ${SLOW.name} {}]]`);
    const held = await rig.tools.calls.next((c) => c.path === "/slow");
    rig.svc.refuseLinks = 503;
    fake.ws!.terminate();
    await rig.svc.refused.nth(0);
    // The tool answers and the turn ends while no socket is up.
    held.res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ content: [{ type: "text", text: "late" }] }));
    await rig.logs.find((l) => l.msg === "tool call finished");
    await rig.svc.refused.nth(rig.svc.refused.items.length); // one more attempt refused after that
    expect(rig.host.session("sess-away")!.link.isOpen).toBe(false);
    rig.svc.refuseLinks = undefined;
    const end = await turnEnd(fake, turn);
    expect(end.status).toBe("completed");
    expectContiguous(fake);
    expect(count(fake, "tool_result")).toBe(1);
  });

  it("sends a turn's first delta at once in a frame of its own: first output waits for no batch and carries no ack", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-first");
    await opened(fake);
    // The wait keeps the turn's first native record (the user message) well ahead of the first delta.
    const turn = rig.run(fake, "[[ttft 30]] [[deltas 5]]");
    const end = await turnEnd(fake, turn);
    expect(end.status).toBe("completed");
    const deltas = fake.turn(turn).filter((m) => m.t === "delta");
    expect(fake.soloDeltas.has(deltas[0]!)).toBe(true);
    const assistant = fake.turn(turn).find((m) => m.t === "assistant") as Extract<LinkUp, { t: "assistant" }>;
    expect(deltas.map((d) => d.text).join("")).toBe(assistant.text);
    expectContiguous(fake);
  });

  it("holds the run's ack and the user message's native record for the turn's next numbered message: the deltas before them go alone, and a short turn is one frame the object writes", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-hold");
    await opened(fake);
    const framesBefore = fake.batches.length;
    const seqBefore = fake.appliedUp;
    const turn = rig.run(fake, "[[ttft 30]] [[deltas 40]]");
    const end = await turnEnd(fake, turn);
    expect(end.status).toBe("completed");
    const numbered = fake.ups.items.filter((m): m is NumberedUp => "seq" in m && m.seq > seqBefore);
    expect(numbered[0]).toMatchObject({ t: "native", records: [{ role: "user" }] });
    const frames = fake.batches.slice(framesBefore);
    const carrying = frames.findIndex((b) => b.includes(numbered[0]!.seq));
    expect(frames[carrying]).toEqual(expect.arrayContaining(["ack", ...numbered.map((m) => m.seq)]));
    // Before it, only live deltas: frames the object publishes without a write.
    expect(frames.slice(0, carrying).flat().every((x) => x === "delta")).toBe(true);
    expect(fake.ackedDown).toBe(fake.lastDown);
    expectContiguous(fake);
  });

  it("lets a native record wait for the next frame, so a first delta sent after it still goes first; alone it goes after HOLD_MS", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-native");
    await opened(fake);
    const link = rig.host.session("sess-native")!.link;
    const turn = "c".repeat(32);
    const seq = link.send({ t: "native", records: [{ role: "user", content: "hi" }] });
    link.sendLive({ t: "delta", turn, text: "first" }, true);
    const first = await fake.ups.find((m) => m.t === "delta" || m.t === "native");
    expect(first).toMatchObject({ t: "delta", text: "first" });
    expect(fake.soloDeltas.has(first)).toBe(true);
    // Nothing else is sent: the record still leaves, on its own, once its wait is over.
    const native = await fake.ups.find((m) => m.t === "native");
    expect(native).toMatchObject({ seq, records: [{ role: "user", content: "hi" }] });
    expect(await link.waitAcked(5_000, seq)).toBe(true);
    expectContiguous(fake);
  });

  it("applies a repeated down message once and re-acks it", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-dup");
    await opened(fake);
    const turn = rig.run(fake, "once");
    await turnEnd(fake, turn);
    // The object resends the run (its ack got lost on its side): it must not run again.
    const again = { t: "run", seq: 2, turn, text: "once", accepted_at: Date.now(), provider: rig.grant() };
    fake.sendRaw(again);
    const next = rig.run(fake, "second"); // seq 3
    await turnEnd(fake, next);
    expect(fake.ups.items.filter((m) => m.t === "turn_end" && m.turn === turn)).toHaveLength(1);
    expect(rig.provider.requests).toHaveLength(2);
    expect(fake.ackedDown).toBe(3);
    expectContiguous(fake);
  });

  it("redials on a gap in down seqs and says in hello what it applied", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-gap");
    await opened(fake);
    fake.sendRaw({ t: "interrupt", seq: 9, turn: "f".repeat(32) });
    expect(await fake.hellos.nth(1)).toEqual({ t: "hello", down: 1 });
    const turn = rig.run(fake, "after the gap"); // seq 2 (the fake never recorded seq 9)
    expect((await turnEnd(fake, turn)).status).toBe("completed");
  });

  it("drops the session when the object ends the lease with 4409, stopping its turn", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-4409");
    await opened(fake);
    const turn = rig.run(fake, "[[hang]]");
    await rig.provider.waitForRequests(1);
    expect(rig.host.session("sess-4409")!.currentTurn?.id).toBe(turn);
    fake.ws!.close(4409, "lease gone");
    await rig.logs.find((l) => l.msg === "session detached" && l.fields.session === "sess-4409");
    expect(rig.host.session("sess-4409")).toBeUndefined();
    expect(fake.sockets.items.filter((s) => s.open)).toHaveLength(1); // no redial
    expect(rig.host.pool.active).toBe(0); // detached from its harness process
  });

  it("gives the lease up when the link upgrade is refused with 409", async () => {
    rig = await Rig.start();
    const control = await rig.svc.control();
    control.send({ t: "attach", session: "sess-other", lease: 1, harness: "ref" }); // no such object
    const lost = await rig.logs.find((l) => l.msg === "session lease lost" && l.fields.session === "sess-other");
    expect(lost.fields.reason).toBe("link refused with HTTP 409");
    await rig.logs.find((l) => l.msg === "session detached" && l.fields.session === "sess-other");
    expect(rig.host.session("sess-other")).toBeUndefined();
    expect(rig.svc.refused.items).toHaveLength(1); // no redial
  });

  it("gives the lease up when the object stays unreachable for linkGiveUpMs", async () => {
    rig = await Rig.start({ host: { linkGiveUpMs: 300 } });
    rig.svc.refuseLinks = 503;
    await rig.svc.attach("sess-away");
    const lost = await rig.logs.find((l) => l.msg === "session lease lost" && l.fields.session === "sess-away");
    expect(lost.fields.reason).toMatch(/unreachable for 300 ms/);
    expect(rig.svc.refused.items.length).toBeGreaterThanOrEqual(2); // it kept trying meanwhile
    await rig.logs.find((l) => l.msg === "session detached" && l.fields.session === "sess-away");
    expect(rig.host.session("sess-away")).toBeUndefined();
  });
});
