/** Bearer tokens → principals, and the permission rules of docs/api.md "Authentication". */
import type { Context, MiddlewareHandler } from "hono";
import { existingSession } from "../persistence/lookup.ts";
import { forbidden, ServiceError, unauthorized } from "../shared/errors.ts";
import { sha256Hex } from "../shared/ids.ts";
import { isInspectionToken, verifyInspectionToken, type InspectionScope } from "../shared/inspection-token.ts";
import type { Grant } from "../runtime.ts";
import type { AppEnv } from "./context.ts";

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/**
 * Digests of the tokens that were granted something, by token: a client sends the same token with
 * every request, and its SHA-256 through the runtime's (asynchronous) crypto was ~1.3% of workerd's
 * CPU under the 50-session bench (bench/RESULTS.md, fourteenth session). A digest, not a grant:
 * every request still looks the grant up in the configuration it runs under, so a token taken out
 * of it is refused at once. Only granted tokens are kept, so unknown ones cannot fill it.
 */
const digests = new Map<string, string>();
/** Entries kept before the map starts over: far more tokens than a configuration holds. */
const DIGESTS_KEPT = 1_024;

/**
 * The token of an `Authorization: Bearer <token>` header (scheme in any case), or undefined. Not
 * hono's bearerAuth: it admits only RFC 6750 token characters, so a configured secret holding any
 * other character could never authenticate, and it answers a malformed header with 400 where the
 * service answers 401 forbidden (docs/design-notes.md "Kept libraries").
 */
export function bearerToken(header: string | undefined): string | undefined {
  return BEARER.exec(header ?? "")?.[1];
}

export const requireToken: MiddlewareHandler<AppEnv> = async (c, next) => {
  const token = bearerToken(c.req.header("Authorization"));
  const rt = c.get("runtime");
  let grant: Grant | undefined;
  if (token !== undefined && isInspectionToken(token)) {
    const scope = rt.runnerSecret ? await verifyInspectionToken(rt.runnerSecret, token) : undefined;
    if (scope && !(await inspectionOpen(c, scope))) throw unauthorized("the inspection token's tool call has ended");
    if (scope) grant = { tenant: scope.tenant, session: scope.session, manage: false, readOnly: true, inspectCall: scope.call };
  } else if (token !== undefined) {
    const known = digests.get(token);
    const digest = known ?? (await sha256Hex(token));
    grant = rt.grants.get(digest);
    if (grant && known === undefined) {
      if (digests.size >= DIGESTS_KEPT) digests.clear();
      digests.set(token, digest);
    }
  }
  if (!grant) throw unauthorized();
  c.set("principal", grant);
  await next();
};

/**
 * Whether an inspection token's tool call is still open. Asked here, before any other check, so a
 * spent token is `401` on every route (docs/api.md "Authentication", rule 1), not `403` where an
 * inspection token may not go; the session's reads ask again, as the call may end in between. A
 * session that exists nowhere any more holds no open call.
 */
async function inspectionOpen(c: Context<AppEnv>, scope: InspectionScope): Promise<boolean> {
  let stub;
  try {
    stub = await existingSession(c.env, c.get("runtime"), scope.tenant, scope.session);
  } catch (e) {
    if (e instanceof ServiceError && e.code === "not_found") return false;
    throw e;
  }
  return stub.inspectionOpen(scope.call);
}

/** Writes are every non-GET request: a read-only token may only list, get, read events and sync. */
export function requireWrite(p: Grant): void {
  if (p.readOnly) throw forbidden("this token is read-only");
}

export function requireManage(p: Grant): void {
  requireWrite(p);
  if (!p.manage) throw forbidden("this operation needs a token with manage");
}

/** An inspection token reads its session (the session and its events) and nothing else. */
export function refuseInspection(p: Grant): void {
  if (p.inspectCall !== undefined) throw forbidden("an inspection token may only read its own session and its events");
}

/** A session-scoped token reaches only its own session. */
export function requireSessionAccess(p: Grant, sessionId: string): void {
  if (p.session !== undefined && p.session !== sessionId) {
    throw forbidden("this token is scoped to another session");
  }
}
