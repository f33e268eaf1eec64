/**
 * Public health endpoints (docs/api.md "Shutdown and readiness"). Readiness needs a connected
 * runner-host that is not draining, in any region, and a stack that is not shutting down (src/http/draining.ts); it reads the isolate's fleet snapshot, not every pool on every probe.
 * With persistence it also needs a finished startup scan and an upload backlog below
 * `persistence.queue`; in the local stack, room on its disks (the LOCAL_DISK binding, asked last:
 * a probe that already failed costs the stack no `statfs`).
 */
import { Hono } from "hono";
import type { AppEnv } from "../http/context.ts";
import { isShuttingDown } from "../http/draining.ts";
import { LOCAL_DISK_ROOM_URL } from "../runtime-constants.ts";
import { BACKLOG_NAME } from "../persistence/backlog-object.ts";
import { fleetStatus, fleetSummary } from "../runner/fleet.ts";

export const health = new Hono<AppEnv>();

/** Longest a probe waits on the local stack's disk answer, ms: a few `statfs` calls take microseconds. */
const LOCAL_DISK_MS = 2_000;

health.get("/live", (c) => c.json({ status: "ok" }));

health.get("/ready", async (c) => {
  if (isShuttingDown()) return c.json({ status: "not_ready" }, 503);
  let { ready } = fleetSummary(await fleetStatus(c.env, c.get("runtime").config));
  const p = c.get("runtime").config.persistence;
  if (p) {
    const backlog = await c.env.SYNC_BACKLOG.getByName(BACKLOG_NAME).status();
    ready &&= backlog.scanned && backlog.pending < p.queue;
  }
  if (ready && c.env.LOCAL_DISK) ready = await diskHasRoom(c.env.LOCAL_DISK);
  return ready ? c.json({ status: "ready" }) : c.json({ status: "not_ready" }, 503);
});

/** The local stack's answer; one it cannot give (its process stuck or gone) is no room. */
async function diskHasRoom(disk: Fetcher): Promise<boolean> {
  try {
    const res = await disk.fetch(LOCAL_DISK_ROOM_URL, { signal: AbortSignal.timeout(LOCAL_DISK_MS) });
    return res.ok && ((await res.json()) as { ok?: unknown }).ok === true;
  } catch {
    return false;
  }
}
