/**
 * Public health endpoints (spec "Health"). Readiness needs a connected runner-host that is not
 * draining, in any region; it reads the isolate's fleet snapshot, not every pool on every probe.
 */
import { Hono } from "hono";
import type { AppEnv } from "../http/context.ts";
import { fleetStatus, fleetSummary } from "../runner/fleet.ts";

export const health = new Hono<AppEnv>();

health.get("/live", (c) => c.json({ status: "ok" }));

health.get("/ready", async (c) => {
  const { ready } = fleetSummary(await fleetStatus(c.env, c.get("runtime").config));
  return ready ? c.json({ status: "ready" }) : c.json({ status: "not_ready" }, 503);
});
