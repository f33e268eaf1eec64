/**
 * Runner-host dial-in. The runner secret travels as a bearer token; the socket itself is accepted
 * by the object it is forwarded to.
 */
import { Hono } from "hono";
import { invalid, unauthorized } from "../shared/errors.ts";
import { sha256Hex } from "../shared/ids.ts";
import type { AppEnv } from "../http/context.ts";
import { BACKLOG_NAME } from "../persistence/backlog-object.ts";
import { POOL_NAME } from "../runner/pool-name.ts";
import { sessionObjectName } from "../session/session-object.ts";

export const internal = new Hono<AppEnv>();

internal.use("*", async (c, next) => {
  const m = /^Bearer[ \t]+(\S+)$/i.exec(c.req.header("Authorization") ?? "");
  const digest = c.get("runtime").runnerDigest;
  if (!m || !digest || (await sha256Hex(m[1]!)) !== digest) throw unauthorized("runner secret is missing or wrong");
  await next();
});

/** Metric totals since the last read (src/shared/metrics-protocol.ts), for a runner-host to export. */
internal.get("/metrics", async (c) => c.json(await c.env.SYNC_BACKLOG.getByName(BACKLOG_NAME).drainMetrics()));

internal.get("/runners/control", (c) => c.env.RUNNERS.getByName(POOL_NAME).fetch(c.req.raw));

/** `?session=<object name>&lease=<n>`: a runner-host's link to one attached session. */
internal.get("/runners/link", (c) => {
  const name = c.req.query("session") ?? "";
  const lease = c.req.query("lease") ?? "";
  const m = /^([a-f0-9]{32}):(.+)$/s.exec(name);
  if (!m || !/^[1-9][0-9]{0,15}$/.test(lease)) throw invalid("session and lease are required");
  const stub = c.env.SESSIONS.getByName(sessionObjectName(m[2]!, m[1]!));
  return stub.fetch(`https://session/link?lease=${lease}`, { headers: { Upgrade: "websocket" } });
});
