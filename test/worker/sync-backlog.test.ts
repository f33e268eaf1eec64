/**
 * Readiness with persistence (docs/api.md "Shutdown and readiness": `503` until the startup check of sessions needing
 * upload completes): the SyncBacklog's startup scan runs whenever the object starts, which is also
 * after workerd evicts it for being idle. A fresh object here stands for one just started.
 */
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { SyncBacklog } from "../../src/persistence/backlog-object.ts";
import { newId } from "../../src/shared/ids.ts";
import { env } from "./helpers.ts";

describe("SyncBacklog: the startup scan behind readiness", () => {
  it("with nothing queued, the first status of a just-started object is already scanned (an idle deployment's evicted object is never not ready)", async () => {
    const backlog = env.SYNC_BACKLOG.getByName(`test-${newId()}`);
    expect(await backlog.status()).toEqual({ pending: 0, scanned: true });
  });

  it("a scan that outlasts the probe's wait answers not scanned (readiness 503) until it ends", async () => {
    const backlog = env.SYNC_BACKLOG.getByName(`test-${newId()}`);
    expect(await backlog.enter(`${newId()}:t`, 10, 10, false)).toBe("entered");
    await runInDurableObject(backlog, async (instance: SyncBacklog) => {
      // The queued session does not answer its wake-up (a busy or unreachable object).
      let answer!: () => void;
      const held = new Promise<void>((resolve) => (answer = resolve));
      (instance as unknown as { env: object }).env = { ...env, SESSIONS: { getByName: () => ({ syncKick: () => held }) } };
      expect(await instance.status()).toEqual({ pending: 1, scanned: false });
      answer();
      expect(await instance.status()).toEqual({ pending: 1, scanned: true });
    });
  });

  it("with sessions queued, the first status waits for the short scan, which wakes each of them", async () => {
    const backlog = env.SYNC_BACKLOG.getByName(`test-${newId()}`);
    expect(await backlog.enter(`${newId()}:t`, 10, 10, false)).toBe("entered");
    expect(await backlog.enter(`${newId()}:t`, 10, 10, false)).toBe("entered");
    expect(await backlog.status()).toEqual({ pending: 2, scanned: true });
  });

  it("refuses a tenant's session past its share while other tenants' still join; the queue's own limit refuses everyone; work already running always joins", async () => {
    const backlog = env.SYNC_BACKLOG.getByName(`test-${newId()}`);
    // A queue of 4 shared by several tenants: one tenant holds at most 3.
    for (let i = 0; i < 3; i++) expect(await backlog.enter(`${newId()}:greedy`, 4, 3, false)).toBe("entered");
    expect(await backlog.enter(`${newId()}:greedy`, 4, 3, false)).toBe("share_full");
    expect(await backlog.enter(`${newId()}:other`, 4, 3, false)).toBe("entered");
    expect(await backlog.enter(`${newId()}:third`, 4, 3, false)).toBe("queue_full");
    expect(await backlog.enter(`${newId()}:greedy`, 4, 3, true)).toBe("entered");
    expect(await backlog.status()).toMatchObject({ pending: 5 });
  });
});
