/**
 * Warm start: the pool keeps `spares` started, `init`-answered harness processes that belong to no
 * tenant, so a session that needs a new process takes one that is already running.
 */
import { afterEach, describe, expect, it } from "vitest";
import { inlineHarness } from "./harness-helpers.ts";
import { opened, Rig, turnEnd } from "./runner-setup.ts";

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.stop();
  rig = undefined;
});

/** Resolves with the pid of the next spare process that said ready. */
async function spareStarted(r: Rig): Promise<number> {
  const l = await r.logs.next((l) => l.msg === "harness process started" && l.fields.spare === true);
  return Number(l.fields.pid);
}

/** Acme's session ran a turn (a spare starts behind it), then a new tenant's session opened in that spare. */
async function sessionInSpare(name: string, spareReplaceMs: number): Promise<{ r: Rig; spare: number }> {
  const r = (rig = await Rig.start({ tenants: ["b"], harness: { spares: 1 }, host: { spareReplaceMs } }));
  const a = await r.open(`${name}-a`);
  await opened(a);
  expect((await turnEnd(a, r.run(a, "first"))).status).toBe("completed");
  const spare = await spareStarted(r);
  await opened(await r.open(`${name}-b`, { tenant: "b" }));
  expect(r.host.pool.residentIn(r.host.session(`${name}-b`)!)!.pid).toBe(spare);
  return { r, spare };
}

describe("spare harness processes", () => {
  it("a new tenant's first session opens in the spare, and another spare starts behind it once that session's first turn ended", async () => {
    // The replacement's own timer far off: only the first turn's end may start it here.
    rig = await Rig.start({ tenants: ["b"], harness: { spares: 1 }, host: { spareReplaceMs: 60_000 } });
    const a = await rig.open("spare-a");
    await opened(a);
    // The runner-host's first session: no spare starts while it opens and runs its first turn either.
    expect(rig.host.pool.processes("ref")).toHaveLength(1);
    expect((await turnEnd(a, rig.run(a, "first"))).status).toBe("completed");
    const spare = await spareStarted(rig);
    const procA = rig.host.pool.residentIn(rig.host.session("spare-a")!)!;
    expect(procA.tenant).toBe("acme");
    expect(spare).not.toBe(procA.pid);

    const b = await rig.open("spare-b", { tenant: "b" });
    await opened(b);
    const procB = rig.host.pool.residentIn(rig.host.session("spare-b")!)!;
    expect(procB.pid).toBe(spare); // no new process was started for it
    expect(procB.tenant).toBe("b");
    // Nothing starts while the new session opens and runs its first turn: a start would hold this
    // process's event loop (the fork) and take a CPU (the start) from that session's first output.
    expect(rig.host.pool.processes("ref").map((p) => p.pid)).toEqual([procA.pid, procB.pid]);
    const tb = rig.run(b, "in the warm process");
    expect((await turnEnd(b, tb)).status).toBe("completed");
    const next = await spareStarted(rig);
    expect([procA.pid, procB.pid]).not.toContain(next);
  });

  it("a taken spare is replaced spareReplaceMs after it was taken when its session runs no turn", async () => {
    const { r, spare } = await sessionInSpare("spare-timer", 200);
    const next = await spareStarted(r); // no turn ever runs in b
    expect(next).not.toBe(spare);
    expect(r.host.pool.processes("ref").find((p) => p.pid === next)!.spare).toBe(true);
  });

  it("a taken spare whose process ends before its session's first turn is replaced at once, not after spareReplaceMs", async () => {
    const { r, spare } = await sessionInSpare("spare-gone", 60_000);
    process.kill(spare, "SIGKILL");
    expect(await spareStarted(r)).not.toBe(spare);
  });

  it("the last detach stops a tenant's process but not the spare", async () => {
    rig = await Rig.start({ harness: { spares: 1 } });
    const a = await rig.open("spare-last");
    await opened(a);
    const spare = await spareStarted(rig);
    await rig.host.pool.evict(rig.host.session("spare-last")!);
    const ready = () => rig!.host.pool.processes("ref").filter((p) => p.usable);
    expect(ready().map((p) => p.pid)).toEqual([spare]);
    expect(ready()[0]!.spare).toBe(true);
  });

  it("spares count toward max_hosts: none is started when the processes are at the limit", async () => {
    rig = await Rig.start({ harness: { spares: 1, max_hosts: 1 } });
    const a = await rig.open("spare-max");
    await opened(a);
    const t = rig.run(a, "one");
    expect((await turnEnd(a, t)).status).toBe("completed");
    expect(rig.host.pool.processes("ref").map((p) => p.spare)).toEqual([false]);
    expect(rig.logs.items.some((l) => l.fields.spare === true)).toBe(false);
  });

  it("spares: 0 keeps none", async () => {
    rig = await Rig.start({ harness: { spares: 0 } });
    const a = await rig.open("spare-off");
    await opened(a);
    const t = rig.run(a, "one");
    expect((await turnEnd(a, t)).status).toBe("completed");
    expect(rig.host.pool.processes("ref")).toHaveLength(1);
  });

  it("a spare that ends unasked is not replaced until a process of that harness starts", async () => {
    rig = await Rig.start({ tenants: ["b"], harness: { spares: 1 } });
    const a = await rig.open("spare-ends");
    await opened(a);
    const spare = await spareStarted(rig);
    process.kill(spare, "SIGKILL"); // as a harness that exits when it holds no session
    await rig.logs.next((l) => l.msg === "harness process ended" && l.fields.pid === spare);
    // Replaced at once, it could end again and again: none is started in its place.
    expect(rig.host.pool.processes("ref").filter((p) => p.spare)).toEqual([]);
    const t = rig.run(a, "one");
    expect((await turnEnd(a, t)).status).toBe("completed");
    expect(rig.host.pool.processes("ref").filter((p) => p.spare)).toEqual([]);
    // Another tenant's session starts a process of its own; a spare follows it.
    const b = await rig.open("spare-ends-b", { tenant: "b" });
    await opened(b);
    expect(await spareStarted(rig)).not.toBe(spare);
  });

  it("spares of a harness that exits when it holds no session do not replace each other: one spare's start is no real start", async () => {
    // Exits 20 ms after `init` unless a session opens in it, before a sibling can start. With spares
    // 2 started one at a time, each spare's start would clear what its sibling's end had set, and
    // they would replace each other for good.
    const [node, e, script] = inlineHarness("leaver", `out({ type: "turn.end", session: cmd.session, turn: cmd.turn, status: "completed" });`);
    const leaver = script!.replace(`if (cmd.op === "init")`, `if (cmd.op === "open") clearTimeout(globalThis.leave); if (cmd.op === "init") globalThis.leave = setTimeout(() => process.exit(0), 20); if (cmd.op === "init")`);
    rig = await Rig.start({ harness: { command: [node!, e!, leaver], spares: 2, max_starting: 1 } });
    const a = await rig.open("spare-leavers");
    await opened(a);
    const first = await spareStarted(rig);
    await rig.logs.next((l) => l.msg === "harness process ended" && l.fields.pid === first);
    const second = await spareStarted(rig); // started while the first one was ready, before it ended
    await rig.logs.next((l) => l.msg === "harness process ended" && l.fields.pid === second);
    expect(rig.host.pool.processes("ref").filter((p) => p.spare)).toEqual([]);
  });

  it("a spare started with the old provider key is replaced when the key changes", async () => {
    rig = await Rig.start({ harness: { spares: 1 } });
    const a = await rig.open("spare-key");
    await opened(a);
    const old = await spareStarted(rig);
    const t = rig.run(a, "with the new key", { provider: rig.grant("test-key-2") });
    expect((await turnEnd(a, t)).status).toBe("completed");
    const fresh = await spareStarted(rig);
    expect(fresh).not.toBe(old);
    const spare = rig.host.pool.processes("ref").find((p) => p.pid === fresh)!;
    expect(spare.providers.openai!.key).toBe("test-key-2");
    expect(rig.host.pool.processes("ref").find((p) => p.pid === old)?.usable ?? false).toBe(false);
  });
});
