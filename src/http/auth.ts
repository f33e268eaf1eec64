/** Bearer tokens → principals, and the permission rules of spec "Authentication". */
import type { MiddlewareHandler } from "hono";
import { forbidden, unauthorized } from "../shared/errors.ts";
import { sha256Hex } from "../shared/ids.ts";
import type { Grant } from "../runtime.ts";
import type { AppEnv } from "./context.ts";

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

export const requireToken: MiddlewareHandler<AppEnv> = async (c, next) => {
  const m = BEARER.exec(c.req.header("Authorization") ?? "");
  const grant = m ? c.get("runtime").grants.get(await sha256Hex(m[1]!)) : undefined;
  if (!grant) throw unauthorized();
  c.set("principal", grant);
  await next();
};

/** Writes are every non-GET request: a read-only token may only list, get, read events and sync. */
export function requireWrite(p: Grant): void {
  if (p.readOnly) throw forbidden("this token is read-only");
}

export function requireManage(p: Grant): void {
  requireWrite(p);
  if (!p.manage) throw forbidden("this operation needs a token with manage");
}

/** A session-scoped token reaches only its own session. */
export function requireSessionAccess(p: Grant, sessionId: string): void {
  if (p.session !== undefined && p.session !== sessionId) {
    throw forbidden("this token is scoped to another session");
  }
}
