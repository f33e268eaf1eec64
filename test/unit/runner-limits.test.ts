/**
 * Capacity on one runner-host (docs/configuration.md "Harnesses", "Limits" `active` and `loaded`): turns and
 * opens wait in order and never fail for lack of room; idle sessions make room; attach orders past
 * `limits.loaded` drop the least recently used idle session or are refused.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { FakeSession } from "./runner-fake-service.ts";
import { opened, Rig, SLOW, turnEnd, type ToolServer } from "./runner-setup.ts";

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.stop();
  rig = undefined;
});

/** Starts a turn that parks on the slow host tool; returns its turn id and a function that lets it finish. */
async function heldTurn(r: Rig, fake: FakeSession, marker: string) {
  const before = r.tools.calls.items.length;
  const turn = r.run(fake, `${marker} [[tool ${SLOW.name} {}]]`);
  const call = await r.tools.calls.nth(before);
  return { turn, release: () => answer(call) };
}

function answer(call: Awaited<ReturnType<ToolServer["calls"]["nth"]>>): void {
  call.res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ content: [{ type: "text", text: "ok" }] }));
}

/** Waits until the runner-host acked down seq `seq` of this session (it has taken the message). */
const taken = (fake: FakeSession, seq: number) => fake.acks.find((a) => a >= seq);

/** Index of the first provider request whose messages mention `marker`. */
function requestIndex(r: Rig, marker: string): number {
  return r.provider.requests.findIndex((q) => JSON.stringify(q.body?.messages ?? []).includes(marker));
}

describe("runner-host capacity", () => {
  it("max_active_turns: further turns wait and start in order when the running one ends", async () => {
    rig = await Rig.start({ harness: { max_shared: 4, max_active_turns: 1, max_hosts: 1 } });
    const [a, b, c] = await Promise.all(["lim-a", "lim-b", "lim-c"].map((n) => rig!.open(n)));
    await Promise.all([a, b, c].map(opened));
    const held = await heldTurn(rig, a!, "alpha-marker");
    const tb = rig.run(b!, "bravo-marker");
    const tc = rig.run(c!, "charlie-marker");
    await Promise.all([taken(b!, 2), taken(c!, 2)]);
    expect(rig.host.pool.waiting).toBe(2);
    expect(requestIndex(rig, "bravo-marker")).toBe(-1);

    held.release();
    const [endA, endB, endC] = await Promise.all([turnEnd(a!, held.turn), turnEnd(b!, tb), turnEnd(c!, tc)]);
    expect([endA.status, endB.status, endC.status]).toEqual(["completed", "completed", "completed"]);
    // One process; B ran after A's last request, C after B's.
    expect(rig.host.pool.processes("ref")).toHaveLength(1);
    const lastA = rig.provider.requests.findLastIndex((q) => JSON.stringify(q.body.messages).includes("alpha-marker"));
    expect(requestIndex(rig, "bravo-marker")).toBeGreaterThan(lastA);
    expect(requestIndex(rig, "charlie-marker")).toBeGreaterThan(requestIndex(rig, "bravo-marker"));
  });

  it("max_shared and max_hosts: a second process past max_shared; at max_hosts an open waits for an idle session", async () => {
    rig = await Rig.start({ harness: { max_shared: 1, max_hosts: 2 } });
    const a = await rig.open("sh-a");
    await opened(a);
    const b = await rig.open("sh-b");
    await opened(b);
    const pids = rig.host.pool.processes("ref").map((p) => p.pid);
    expect(new Set(pids).size).toBe(2);

    const ha = await heldTurn(rig, a, "a-marker");
    const hb = await heldTurn(rig, b, "b-marker");
    const c = await rig.open("sh-c");
    await taken(c, 1);
    expect(rig.host.pool.waiting).toBe(1); // both processes are full and busy
    hb.release();
    await turnEnd(b, hb.turn);
    await opened(c); // B went idle: detached from its process to make room
    expect(rig.host.pool.residentIn(rig.host.session("sh-b")!)).toBeUndefined();
    expect(rig.host.pool.processes("ref").map((p) => p.pid).sort()).toEqual(pids.sort());

    // B's next turn waits for room again, and is re-opened from its cached native state.
    ha.release();
    await turnEnd(a, ha.turn);
    const tb = rig.run(b, "b-again");
    expect((await turnEnd(b, tb)).status).toBe("completed");
    const last = rig.provider.requests.at(-1)!;
    expect(JSON.stringify(last.body.messages)).toContain("b-marker");
  });

  it("max_hosts: a process whose session waits for its turn is not stopped to make room; the turn runs while the other tenant's waits", async () => {
    rig = await Rig.start({ harness: { max_shared: 1, max_hosts: 2 }, tenants: ["bravo"] });
    const a1 = await rig.open("mh-a1");
    await opened(a1);
    const held = await heldTurn(rig, a1, "a1-marker");
    // Two sessions of two tenants want the one process left, each with a turn on its way.
    const [a2, b1] = await Promise.all([rig.open("mh-a2"), rig.open("mh-b1", { tenant: "bravo" })]);
    const ta = rig.run(a2, "a2-marker");
    const tb = rig.run(b1, "b1-marker");
    const first = await Promise.race([turnEnd(a2, ta), turnEnd(b1, tb)]);
    expect(first.status).toBe("completed");
    // Before this, each process was stopped for the other tenant's before its turn was granted,
    // and neither turn ran until A1's ended.
    const stops = rig.logs.items.filter((l) => l.msg === "stopping harness process").length;
    expect(stops).toBeLessThanOrEqual(1);
    held.release();
    expect((await Promise.all([turnEnd(a1, held.turn), turnEnd(a2, ta), turnEnd(b1, tb)])).map((e) => e.status)).toEqual(["completed", "completed", "completed"]);
  });

  it("limits.active: a new session waits while the only slot runs a turn, then the idle one is detached to make room", async () => {
    rig = await Rig.start({ limits: { active: 1 } });
    const a = await rig.open("act-a");
    await opened(a);
    const ha = await heldTurn(rig, a, "first-a");
    const pid = rig.host.pool.processes("ref")[0]!.pid;
    const b = await rig.open("act-b");
    await taken(b, 1);
    expect(rig.host.pool.waiting).toBe(1);
    expect(b.ups.items.some((m) => m.t === "opened")).toBe(false);

    ha.release();
    await turnEnd(a, ha.turn);
    await opened(b);
    expect(rig.host.pool.active).toBe(1);
    expect(rig.host.pool.processes("ref").map((p) => p.pid)).toEqual([pid]); // same process, A detached from it

    const ta = rig.run(a, "second-a"); // A is cached: B (idle) makes room, A re-opens with its history
    expect((await turnEnd(a, ta)).status).toBe("completed");
    expect(JSON.stringify(rig.provider.requests.at(-1)!.body.messages)).toContain("first-a");
    expect(rig.host.pool.residentIn(rig.host.session("act-b")!)).toBeUndefined();
  });

  it("limits.loaded: an attach past the limit drops the least recently used idle session; with none idle it is refused, and a status follows either way", async () => {
    rig = await Rig.start({ limits: { active: 2, loaded: 2 } });
    const control = await rig.svc.control();
    const a = await rig.open("ld-a");
    await opened(a);
    const b = await rig.open("ld-b");
    await opened(b);
    const c = await rig.open("ld-c"); // A is the least recently used idle one
    expect(await a.ups.find((m) => m.t === "detached")).toMatchObject({ reason: "dropped to make room (limits.loaded)" });
    expect((await a.sockets.find((s) => !s.open)).code).toBe(1000);
    await opened(c);

    const hb = await heldTurn(rig, b, "busy-b");
    const hc = await heldTurn(rig, c, "busy-c");
    control.send({ t: "attach", session: "ld-d", lease: 1, harness: "ref" });
    const refused = await control.messages.find((m) => m.t === "attach_refused");
    expect(refused).toEqual({ t: "attach_refused", session: "ld-d", lease: 1, reason: "full" });
    // The pool counted the order ahead: a status follows every order, even one that changed nothing.
    const after = await control.messages.find((m) => m.t === "status" && control.messages.items.indexOf(m) > control.messages.items.indexOf(refused));
    expect(after).toMatchObject({ capacity: { loaded: 2, loaded_limit: 2, idle: 0 } });
    hb.release();
    hc.release();
    await Promise.all([turnEnd(b, hb.turn), turnEnd(c, hc.turn)]);
  });

  it("limits.loaded: a session that has not run a turn since it was attached is not dropped within the quiet time (its run is on its way); after it, it is, and the pool hears of it", async () => {
    rig = await Rig.start({ limits: { active: 1, loaded: 1 }, host: { yieldAfterMs: 300 } });
    const control = await rig.svc.control();
    const a = await rig.open("qt-a");
    await opened(a);
    control.send({ t: "attach", session: "qt-b", lease: 1, harness: "ref" });
    expect(await control.messages.find((m) => m.t === "attach_refused")).toEqual({ t: "attach_refused", session: "qt-b", lease: 1, reason: "full" });
    expect(a.ups.items.filter((m) => m.t === "detached")).toEqual([]);
    // Nothing else happens on the runner-host: the quiet time passing is announced by itself.
    await control.messages.find((m) => m.t === "status" && m.capacity.loaded === 1 && m.capacity.idle === 1);
    control.send({ t: "attach", session: "qt-b", lease: 2, harness: "ref" });
    expect(await a.ups.find((m) => m.t === "detached")).toMatchObject({ reason: "dropped to make room (limits.loaded)", yielded: true });
  });

  it("limits.loaded: a session that has run a turn is droppable as soon as it is idle, quiet time or not", async () => {
    rig = await Rig.start({ limits: { active: 1, loaded: 1 }, host: { yieldAfterMs: 60_000 } });
    const control = await rig.svc.control();
    const a = await rig.open("rt-a");
    await opened(a);
    expect((await turnEnd(a, rig.run(a, "one turn"))).status).toBe("completed");
    control.send({ t: "attach", session: "rt-b", lease: 1, harness: "ref" });
    expect(await a.ups.find((m) => m.t === "detached")).toMatchObject({ reason: "dropped to make room (limits.loaded)", yielded: true });
  });

  it("limits.loaded: a run that crosses the decision to drop an idle session is not ended there, and detached says yielded", async () => {
    rig = await Rig.start({ limits: { active: 1, loaded: 1 } });
    const control = await rig.svc.control();
    const a = await rig.open("yd-a");
    await opened(a);
    a.autoAck = false; // holds the runner-host between `detached` and the link's close
    control.send({ t: "attach", session: "yd-b", lease: 1, harness: "ref" });
    expect(await a.ups.find((m) => m.t === "detached")).toMatchObject({ reason: "dropped to make room (limits.loaded)", yielded: true });
    // The object began a turn meanwhile: its run reaches a session that is leaving.
    const turn = rig.run(a, "crossing-marker");
    await a.acks.find((down) => down >= 2);
    a.ack();
    await a.sockets.find((x) => !x.open);
    expect(a.ups.items.filter((m) => m.t === "turn_end")).toEqual([]);
    expect(requestIndex(rig, "crossing-marker")).toBe(-1);
    expect(turn).toMatch(/^[0-9a-f]{32}$/);
  });

  it("sends a status when what placement needs changes (loaded; at the limit, how many sessions are idle), not at every turn below it", async () => {
    rig = await Rig.start({ limits: { active: 2, loaded: 2 } });
    const control = await rig.svc.control();
    const statuses = () => control.messages.items.filter((m) => m.t === "status").length;
    const a = await rig.open("st-a");
    await opened(a);
    await control.messages.find((m) => m.t === "status" && m.capacity.loaded === 1);
    // Below the limit the pool never reads the idle count: A's turns send nothing.
    let before = statuses();
    for (let i = 0; i < 3; i++) expect((await turnEnd(a, rig.run(a, `alone ${i}`))).status).toBe("completed");
    expect(statuses()).toBe(before);
    const b = await rig.open("st-b");
    await opened(b);
    const full = await control.messages.find((m) => m.t === "status" && m.capacity.loaded === 2);
    const later = (m: unknown) => control.messages.items.indexOf(m as never) > control.messages.items.indexOf(full);
    // At the limit the pool counts idle sessions (each attach there drops one): A's turns move the
    // count between 1 (B) and 2, and each change is sent, A's idle again after each turn.
    for (let i = 0; i < 3; i++) expect((await turnEnd(a, rig.run(a, `turn ${i}`))).status).toBe("completed");
    await control.messages.find((m) => m.t === "status" && later(m) && control.messages.items.filter((x) => x.t === "status" && later(x) && x.capacity.idle === 2).length >= 3);
    const idles = control.messages.items.filter((m) => m.t === "status" && later(m)).map((m) => (m.t === "status" ? m.capacity.idle : -1));
    expect(idles.filter((n) => n === 1).length).toBeGreaterThanOrEqual(3); // A running, B idle
    expect(idles.filter((n) => n === 2).length).toBeGreaterThanOrEqual(3); // both idle again
    // With both busy at the limit, nothing is idle: that is sent (room at the limit depends on it).
    const ha = await heldTurn(rig, a, "busy-a");
    const hb = await heldTurn(rig, b, "busy-b");
    const busy = await control.messages.find((m) => m.t === "status" && m.capacity.idle === 0 && later(m));
    expect(busy).toMatchObject({ capacity: { loaded: 2, loaded_limit: 2, idle: 0 } });
    ha.release();
    hb.release();
    await Promise.all([turnEnd(a, ha.turn), turnEnd(b, hb.turn)]);
    // And idle again once a turn ends.
    const after = control.messages.items.indexOf(busy);
    expect(await control.messages.find((m) => m.t === "status" && m.capacity.idle > 0 && control.messages.items.indexOf(m) > after)).toBeDefined();
  });

  it("detaches an idle session from its process after the idle time; the last detach closes the process; the next turn re-opens it", async () => {
    rig = await Rig.start({ host: { sessionIdleMs: 100, sessionDropMs: 60_000 } });
    const a = await rig.open("idle-a");
    await opened(a);
    await turnEnd(a, rig.run(a, "hello"));
    const proc = rig.host.pool.processes("ref")[0]!;
    const exit = await proc.hp!.exited;
    expect(exit).toMatchObject({ code: 0, reason: "exited" }); // EOF: a clean exit
    expect(rig.host.session("idle-a")).toBeDefined(); // still attached, state cached
    const t2 = rig.run(a, "again");
    expect((await turnEnd(a, t2)).status).toBe("completed");
    expect(rig.host.pool.processes("ref")[0]!.pid).not.toBe(proc.pid);
    expect(JSON.stringify(rig.provider.requests.at(-1)!.body.messages)).toContain("hello");
  });

  it("lets go of a session idle for the drop time: detached, link closed", async () => {
    rig = await Rig.start({ host: { sessionIdleMs: 60_000, sessionDropMs: 100 } });
    const a = await rig.open("drop-a");
    await opened(a);
    const detached = await a.ups.find((m) => m.t === "detached");
    expect(detached).toMatchObject({ reason: expect.stringMatching(/^idle for/) });
    expect(detached).not.toHaveProperty("shutdown"); // an idle drop ends nothing the object queued
    expect((await a.sockets.find((s) => !s.open)).code).toBe(1000);
    expect(rig.host.capacity().loaded).toBe(0);
  });
});
