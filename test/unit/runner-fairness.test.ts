/**
 * `limits.active` slots when they are scarce: one tenant's hung turns cannot hold every slot, and
 * waiting requests are served round-robin across tenants rather than first come, first served.
 */
import { afterEach, describe, expect, it } from "vitest";
import { tenantReserve } from "../../runner-host/harness-pool.ts";
import { opened, Rig, turnEnd } from "./runner-setup.ts";

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.stop();
  rig = undefined;
});

/** Opens a session of `tenant` (the open waits for a slot like a turn does). */
const open = (r: Rig, name: string, tenant: string) => r.open(name, { tenant });
const asked = (r: Rig, marker: string) => r.provider.requests.some((q) => JSON.stringify(q.body?.messages ?? []).includes(marker));
/** Resolves once the provider received a request mentioning `marker`. */
async function reached(r: Rig, marker: string): Promise<void> {
  for (let n = 1; !asked(r, marker); n++) await r.provider.waitForRequests(n, 10_000);
}

describe("fair slots across tenants", () => {
  it("the reserve: an eighth of limits.active, none below 4 or with one tenant", () => {
    expect([tenantReserve(16, 2), tenantReserve(4, 2), tenantReserve(3, 2), tenantReserve(16, 1), tenantReserve(1024, 5)]).toEqual([2, 1, 0, 0, 128]);
  });

  it("tenant A's hanging turns never hold every slot: tenant B's message runs while they hang", async () => {
    rig = await Rig.start({ limits: { active: 4, loaded: 16 }, tenants: ["a", "b"] });
    // Three of A's sessions hang in their turns.
    const as = await Promise.all([0, 1, 2].map((i) => open(rig!, `fair-a${i}`, "a")));
    await Promise.all(as.map(opened));
    for (const [i, a] of as.entries()) rig.run(a, `a${i}-marker [[hang]]`);
    for (const i of [0, 1, 2]) await reached(rig, `a${i}-marker`);
    // A's fourth session waits (its open is applied, not granted): one slot is kept from A. It is
    // attached only now: while one of A's sessions was still idle (its run on the way over its own
    // link), the fourth's open would take that one's place instead.
    const a3 = await open(rig, "fair-a3", "a");
    await a3.acks.find((s) => s >= 1);
    rig.run(a3, "a3-marker [[hang]]");
    expect(rig.host.pool.active).toBe(3);
    expect(rig.host.pool.waiting).toBe(1);

    const b = await open(rig, "fair-b", "b");
    await opened(b);
    const tb = rig.run(b, "b-marker");
    expect((await turnEnd(b, tb)).status).toBe("completed");
    expect(asked(rig, "a3-marker")).toBe(false);
  });

  it("a freed slot goes to the tenant served longest ago, not to the request that waited longest", async () => {
    rig = await Rig.start({ limits: { active: 4, loaded: 16 }, tenants: ["a", "b", "c"] });
    const [a1, a2] = await Promise.all(["fair-a1", "fair-a2"].map((n) => open(rig!, n, "a")));
    await Promise.all([a1, a2].map((f) => opened(f!)));
    rig.run(a1!, "a1-marker [[hang]]");
    rig.run(a2!, "a2-marker [[hang]]");
    const [b1, b2] = await Promise.all(["fair-b1", "fair-b2"].map((n) => open(rig!, n, "b")));
    await Promise.all([b1, b2].map((f) => opened(f!)));
    const tb1 = rig.run(b1!, "b1-marker [[hang]]");
    rig.run(b2!, "b2-marker [[hang]]");
    for (const m of ["a1", "a2", "b1", "b2"]) await reached(rig, `${m}-marker`);
    expect(rig.host.pool.active).toBe(4);

    // A waits first, C after it; then one of B's turns ends and frees a slot.
    const a3 = await open(rig, "fair-a3", "a");
    await a3.acks.find((s) => s >= 1);
    const c1 = await open(rig, "fair-c1", "c");
    await c1.acks.find((s) => s >= 1);
    expect(rig.host.pool.waiting).toBe(2);
    b1!.send({ t: "interrupt", turn: tb1 });
    expect((await turnEnd(b1!, tb1)).status).toBe("interrupted");

    await opened(c1); // C was never served: it gets the slot, though A asked first
    expect(a3.ups.items.some((m) => m.t === "opened" || m.t === "open_failed")).toBe(false);
    const tc = rig.run(c1, "c1-marker");
    expect((await turnEnd(c1, tc)).status).toBe("completed");
    await opened(a3); // and A is next: C's idle session makes room
  });
});
