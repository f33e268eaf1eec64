/**
 * Public health endpoints (docs/api.md "Shutdown and readiness"). Readiness needs a connected
 * runner-host that is not draining, in any region, and a stack that is not shutting down (src/http/draining.ts); it reads the isolate's fleet snapshot, not every pool on every probe.
 * With persistence it also needs a finished startup scan and an upload backlog below
 * `persistence.queue`.
 */
import { Hono } from "hono";
import type { AppEnv } from "../http/context.ts";
import { isShuttingDown } from "../http/draining.ts";
import { BACKLOG_NAME } from "../persistence/backlog-object.ts";
import { fleetStatus, fleetSummary } from "../runner/fleet.ts";

export const health = new Hono<AppEnv>();

health.get("/live", (c) => c.json({ status: "ok" }));

health.get("/ready", async (c) => {
  if (isShuttingDown()) return c.json({ status: "not_ready" }, 503);
  let { ready } = fleetSummary(await fleetStatus(c.env, c.get("runtime").config));
  const p = c.get("runtime").config.persistence;
  if (p) {
    const backlog = await c.env.SYNC_BACKLOG.getByName(BACKLOG_NAME).status();
    ready &&= backlog.scanned && backlog.pending < p.queue;
  }
  return ready ? c.json({ status: "ready" }) : c.json({ status: "not_ready" }, 503);
});
