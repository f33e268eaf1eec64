/**
 * Runner-host dial-in. The runner secret travels as a bearer token; the socket itself is accepted
 * by the object it is forwarded to.
 */
import { Hono } from "hono";
import { unauthorized } from "../shared/errors.ts";
import { sha256Hex } from "../shared/ids.ts";
import type { AppEnv } from "../http/context.ts";

export const POOL_NAME = "default";

export const internal = new Hono<AppEnv>();

internal.use("*", async (c, next) => {
  const m = /^Bearer[ \t]+(\S+)$/i.exec(c.req.header("Authorization") ?? "");
  const digest = c.get("runtime").runnerDigest;
  if (!m || !digest || (await sha256Hex(m[1]!)) !== digest) throw unauthorized("runner secret is missing or wrong");
  await next();
});

internal.get("/runners/control", (c) => c.env.RUNNERS.getByName(POOL_NAME).fetch(c.req.raw));
