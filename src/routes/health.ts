/**
 * Public health endpoints (spec "Health"). Readiness needs a connected runner-host and, with
 * persistence, a finished startup scan and an upload backlog below `persistence.queue`.
 */
import { Hono } from "hono";
import type { AppEnv } from "../http/context.ts";
import { BACKLOG_NAME } from "../persistence/backlog-object.ts";
import { POOL_NAME } from "../runner/pool-name.ts";

export const health = new Hono<AppEnv>();

health.get("/live", (c) => c.json({ status: "ok" }));

health.get("/ready", async (c) => {
  const pool = await c.env.RUNNERS.getByName(POOL_NAME).status();
  let ready = pool.ready > 0;
  const p = c.get("runtime").config.persistence;
  if (p) {
    const backlog = await c.env.SYNC_BACKLOG.getByName(BACKLOG_NAME).status();
    ready &&= backlog.scanned && backlog.pending < p.queue;
  }
  return ready ? c.json({ status: "ready" }) : c.json({ status: "not_ready" }, 503);
});
