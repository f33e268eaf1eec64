/**
 * Readiness with persistence (spec "Health": `503` until the startup check of sessions needing
 * upload completes): the SyncBacklog's startup scan runs whenever the object starts, which is also
 * after workerd evicts it for being idle. A fresh object here stands for one just started.
 */
import { describe, expect, it } from "vitest";
import { newId } from "../../src/shared/ids.ts";
import { env } from "./helpers.ts";

describe("SyncBacklog: the startup scan behind readiness", () => {
  it("with nothing queued, the first status of a just-started object is already scanned (an idle deployment's evicted object is never not ready)", async () => {
    const backlog = env.SYNC_BACKLOG.getByName(`test-${newId()}`);
    expect(await backlog.status()).toEqual({ pending: 0, scanned: true });
  });

  it("with sessions queued, the first status waits for the short scan, which wakes each of them", async () => {
    const backlog = env.SYNC_BACKLOG.getByName(`test-${newId()}`);
    expect(await backlog.enter(`s-${newId()}`, 10, false)).toBe(true);
    expect(await backlog.enter(`s-${newId()}`, 10, false)).toBe(true);
    expect(await backlog.status()).toEqual({ pending: 2, scanned: true });
  });
});
