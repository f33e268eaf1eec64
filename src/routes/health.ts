/** Public health endpoints (spec "Health"). Readiness needs a connected runner-host. */
import { Hono } from "hono";
import type { AppEnv } from "../http/context.ts";
import { POOL_NAME } from "../runner/pool-name.ts";

export const health = new Hono<AppEnv>();

health.get("/live", (c) => c.json({ status: "ok" }));

health.get("/ready", async (c) => {
  const pool = await c.env.RUNNERS.getByName(POOL_NAME).status();
  return pool.ready > 0 ? c.json({ status: "ready" }) : c.json({ status: "not_ready" }, 503);
});
