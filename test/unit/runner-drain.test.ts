/**
 * Shutdown (docs/api.md "Shutdown and readiness": SIGINT/SIGTERM stop new work and interrupt running
 * turns): `RunnerHost.drain` ends running and waiting turns as interrupted by shutdown, has them
 * acked, detaches every session and stops the harness processes.
 */
import { existsSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { alive, opened, Rig, SLOW, turnEnd } from "./runner-setup.ts";

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.stop();
  rig = undefined;
});

const SHUTDOWN = { status: "interrupted", error: { code: "conflict", message: "the service is shutting down" } };

describe("runner-host drain", () => {
  it("interrupts running turns with conflict, answers pending tool calls, detaches sessions, stops processes, refuses attaches", async () => {
    rig = await Rig.start({ harness: { max_active_turns: 2 } });
    const control = await rig.svc.control();
    const streaming = await rig.open("dr-stream");
    const tooling = await rig.open("dr-tool");
    const waiting = await rig.open("dr-wait");
    await Promise.all([streaming, tooling, waiting].map(opened));
    const ts = rig.run(streaming, "[[hang]]");
    const tt = rig.run(tooling, `[[tool ${SLOW.name} {}]]`);
    await rig.tools.calls.next((c) => c.path === "/slow");
    const tw = rig.run(waiting, "queued behind the other two");
    await waiting.acks.find((a) => a >= 2);
    expect(rig.host.pool.waiting).toBe(1);
    const pids = rig.host.pool.processes().map((p) => p.pid);

    const t0 = performance.now();
    await rig.host.drain();
    const drainMs = performance.now() - t0;

    for (const [fake, turn] of [[streaming, ts], [tooling, tt], [waiting, tw]] as const) {
      expect(await turnEnd(fake, turn)).toMatchObject(SHUTDOWN);
      expect(fake.ups.items.at(-1)).toMatchObject({ t: "detached", reason: "the runner-host is shutting down", shutdown: true });
      expect(fake.appliedUp).toBe(fake.ups.items.filter((m) => "seq" in m).length); // all delivered
      expect((await fake.sockets.find((s) => !s.open)).code).toBe(1000);
    }
    const results = tooling.ups.items.filter((m) => m.t === "tool_result");
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ result: { is_error: true, unknown_outcome: true } });
    expect(pids.map(alive)).toEqual(pids.map(() => false));
    expect(drainMs).toBeLessThan(5_000);
    console.log(`drain with 3 sessions (2 running, 1 waiting): ${drainMs.toFixed(0)} ms`);

    expect(control.messages.items.findLast((m) => m.t === "status")).toMatchObject({ draining: true });
    control.send({ t: "attach", session: "dr-late", lease: 1, harness: "ref" });
    expect(await control.messages.find((m) => m.t === "attach_refused")).toMatchObject({ session: "dr-late", reason: "draining" });
  });

  // A user of its own, and so a private directory released after the exit, is a root runner-host's.
  it.runIf(process.getuid!() === 0)("a stop right after a process ended for its last detach waits until its private directory is gone", async () => {
    rig = await Rig.start();
    const fake = await rig.open("dr-clean");
    await opened(fake);
    const proc = rig.host.pool.residentIn(rig.host.session("dr-clean")!)!;
    const dir = proc.hp!.workDir;
    expect(existsSync(dir)).toBe(true);
    const ended = rig.logs.next((l) => l.msg === "harness exited" && l.fields.pid === proc.pid);
    await rig.host.pool.evict(rig.host.session("dr-clean")!);
    await ended; // off the pool's books; its user's release (and the directory's removal) still running
    await rig.host.drain();
    expect(existsSync(dir)).toBe(false);
  });

  it("does not wait past its bound for an object that never acks", async () => {
    rig = await Rig.start();
    const fake = await rig.open("dr-deaf");
    await opened(fake);
    const turn = rig.run(fake, "[[hang]]");
    await rig.provider.waitForRequests(1);
    fake.autoAck = false;
    const t0 = performance.now();
    await rig.host.drain();
    const ms = performance.now() - t0;
    expect(await turnEnd(fake, turn)).toMatchObject(SHUTDOWN);
    expect(ms).toBeGreaterThan(4_000); // it waited for the ack of detached…
    expect(ms).toBeLessThan(8_000); // …but not forever
  }, 15_000);
});
