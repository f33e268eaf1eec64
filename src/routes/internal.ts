/**
 * Runner-host dial-in, and the operator's status check. The runner secret travels as a bearer
 * token; a socket is accepted by the object it is forwarded to. A control socket states its
 * protocol version and region in the query: a runner-host speaking another version, or announcing
 * a region the configuration does not list, is refused with `409` and a message saying which.
 */
import { Hono } from "hono";
import { conflict, invalid, unauthorized } from "../shared/errors.ts";
import { sha256Hex } from "../shared/ids.ts";
import { RUNNER_PROTOCOL } from "../shared/runner-protocol.ts";
import type { AppEnv } from "../http/context.ts";
import { log } from "../log.ts";
import { fleetStatus } from "../runner/fleet.ts";
import { configuredRegions, poolName } from "../runner/pool-name.ts";
import { REGION_HEADER } from "../runner/runner-pool.ts";
import { sessionObjectName } from "../session/session-object.ts";

export const internal = new Hono<AppEnv>();

internal.use("*", async (c, next) => {
  const m = /^Bearer[ \t]+(\S+)$/i.exec(c.req.header("Authorization") ?? "");
  const digest = c.get("runtime").runnerDigest;
  if (!m || !digest || (await sha256Hex(m[1]!)) !== digest) throw unauthorized("runner secret is missing or wrong");
  await next();
});

internal.get("/runners/control", (c) => {
  const protocol = c.req.query("protocol") ?? "";
  const region = c.req.query("region") ?? "";
  if (protocol !== String(RUNNER_PROTOCOL)) {
    log("warn", "runner-host refused: protocol version mismatch", { runner_protocol: protocol || "none", service_protocol: RUNNER_PROTOCOL });
    throw conflict(
      `runner protocol ${protocol || "(none)"} is not supported: this service speaks ${RUNNER_PROTOCOL}; ` +
        "run a runner-host of the same release as the Worker",
    );
  }
  const regions = configuredRegions(c.get("runtime").config);
  if (!regions.includes(region)) {
    log("warn", "runner-host refused: unknown region", { region });
    throw conflict(`region "${region}" is not configured (runners.regions: ${regions.join(", ")})`);
  }
  const headers = new Headers(c.req.raw.headers);
  headers.set(REGION_HEADER, region);
  return c.env.RUNNERS.getByName(poolName(region)).fetch(new Request(c.req.raw, { headers }));
});

/** `?session=<object name>&lease=<n>`: a runner-host's link to one attached session. */
internal.get("/runners/link", (c) => {
  const name = c.req.query("session") ?? "";
  const lease = c.req.query("lease") ?? "";
  const m = /^([a-f0-9]{32}):(.+)$/s.exec(name);
  if (!m || !/^[1-9][0-9]{0,15}$/.test(lease)) throw invalid("session and lease are required");
  const stub = c.env.SESSIONS.getByName(sessionObjectName(m[2]!, m[1]!));
  return stub.fetch(`https://session/link?lease=${lease}`, { headers: { Upgrade: "websocket" } });
});

/**
 * `GET /internal/status` (runner secret): what an operator checks after a deploy. Where the host
 * configuration came from, the variables it names that this Worker lacks (names and reasons, never
 * values), and each region's runner-hosts, asked fresh.
 */
internal.get("/status", async (c) => {
  const rt = c.get("runtime");
  return c.json({
    config: { source: rt.source },
    missing: rt.envProblems,
    protocol: RUNNER_PROTOCOL,
    regions: await fleetStatus(c.env, rt.config, 0),
  });
});
