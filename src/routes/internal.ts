/**
 * Runner-host dial-in. The runner secret travels as a bearer token; the socket itself is accepted
 * by the object it is forwarded to.
 */
import { Hono } from "hono";
import { timingSafeEqual } from "node:crypto";
import { invalid, unauthorized } from "../shared/errors.ts";
import { ID_PATTERN, sha256Hex } from "../shared/ids.ts";
import { bearerToken } from "../http/auth.ts";
import type { AppEnv } from "../http/context.ts";
import { POOL_NAME } from "../runner/pool-name.ts";
import { sessionObjectName } from "../session/session-object.ts";

export const internal = new Hono<AppEnv>();

const encoder = new TextEncoder();
/** Compares two hex SHA-256 digests in constant time. */
const sameDigest = (a: string, b: string) => a.length === b.length && timingSafeEqual(encoder.encode(a), encoder.encode(b));

internal.use("*", async (c, next) => {
  const token = bearerToken(c.req.header("Authorization"));
  const digest = c.get("runtime").runnerDigest;
  if (token === undefined || !digest || !sameDigest(await sha256Hex(token), digest)) throw unauthorized("runner secret is missing or wrong");
  await next();
});

internal.get("/runners/control", (c) => c.env.RUNNERS.getByName(POOL_NAME).fetch(c.req.raw));

/** `?session=<object name>&lease=<n>`: a runner-host's link to one attached session. */
internal.get("/runners/link", (c) => {
  const name = c.req.query("session") ?? "";
  const lease = c.req.query("lease") ?? "";
  // The object name is `<session id>:<tenant>` (sessionObjectName).
  const id = name.slice(0, 32);
  const tenant = name.slice(33);
  if (!ID_PATTERN.test(id) || name[32] !== ":" || tenant === "" || !/^[1-9][0-9]{0,15}$/.test(lease)) {
    throw invalid("session and lease are required");
  }
  const stub = c.env.SESSIONS.getByName(sessionObjectName(tenant, id));
  return stub.fetch(`https://session/link?lease=${lease}`, { headers: { Upgrade: "websocket" } });
});
