/**
 * docs/design-notes.md "Runner link": a RunnerPool looks for silent runner-hosts (no message, no
 * ping answered for 45 s) only while one holds sessions, so an idle deployment has no alarm; a
 * runner-host that holds sessions arms the check.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { SILENCE_CHECK_MS } from "../../src/shared/runner-protocol.ts";
import { connectRunner, env } from "./helpers.ts";

const alarmOf = (pool: DurableObjectStub) => runInDurableObject(pool, (_, state) => state.storage.getAlarm());

describe("the pool's silence check", () => {
  it("no alarm while its runner-hosts hold no session; one within the check period once one does, and none after they let go", async () => {
    const pool = env.RUNNERS.getByName("silence-test");
    const idle = await connectRunner({ pool, runnerId: "a".repeat(32), capacity: { loaded: 0, loaded_limit: 4, idle: 0 } });
    expect(await alarmOf(pool)).toBeNull();
    const busy = await connectRunner({ pool, runnerId: "c".repeat(32), capacity: { loaded: 1, loaded_limit: 4, idle: 1 } });
    const at = await alarmOf(pool);
    expect(at).not.toBeNull();
    expect(at! - Date.now()).toBeLessThanOrEqual(SILENCE_CHECK_MS);
    // The check finds nobody silent and, while sessions are held, comes again.
    expect(await runDurableObjectAlarm(pool)).toBe(true);
    expect(await alarmOf(pool)).not.toBeNull();
    const capacity = { loaded: 0, loaded_limit: 4, idle: 0 };
    busy.send(JSON.stringify({ t: "status", draining: false, capacity, attaches: 0 }));
    await expect.poll(() => runInDurableObject(pool, (p) => (p as unknown as { status(): { free: number } }).status().free), { timeout: 5_000 }).toBe(8);
    expect(await runDurableObjectAlarm(pool)).toBe(true);
    expect(await alarmOf(pool)).toBeNull();
    idle.close();
    busy.close();
  });
});
