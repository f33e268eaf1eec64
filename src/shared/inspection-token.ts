/**
 * Inspection tokens (docs/api.md "Tools"): short-lived, read-only, scoped to
 * one session and one tool call. This module is the one place they are minted, parsed and
 * verified. The runner-host that dispatches an `inspect_session` tool call mints one; the Worker
 * verifies it. Both hold the runner secret, from which the signing key is derived, so no round trip
 * is needed to mint one. The Worker also asks the session whether the call is still open: a token
 * stops working once the call's result is recorded.
 *
 * Format: `svci.<base64url(JSON {t, s, c, e})>.<base64url(HMAC-SHA256)>` — tenant, session id,
 * call id, expiry (ms since epoch).
 */
import * as z from "zod";
import { fromBase64Url, toBase64Url } from "./base64.ts";

const PREFIX = "svci.";
/** Valid for the tool call's timeout plus this grace, ms (docs/api.md "Tools"). */
export const INSPECTION_GRACE_MS = 60_000;

/** What a token grants: reading `session` of `tenant` while tool call `call` is open. */
export type InspectionScope = { tenant: string; session: string; call: string };

/** The signed claims, short-keyed to keep the bearer token small. */
const ClaimsSchema = z.strictObject({ t: z.string(), s: z.string(), c: z.string(), e: z.number() });

const encoder = new TextEncoder();

async function signingKey(runnerSecret: string): ReturnType<typeof crypto.subtle.importKey> {
  const base = await crypto.subtle.importKey("raw", encoder.encode(runnerSecret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const derived = await crypto.subtle.sign("HMAC", base, encoder.encode("svc inspection token v1"));
  return crypto.subtle.importKey("raw", derived, { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
}

/** Whether a bearer token is meant as an inspection token (valid or not), not a configured one. */
export function isInspectionToken(token: string): boolean {
  return token.startsWith(PREFIX);
}

/** A token for one tool call, valid for the call's timeout plus `INSPECTION_GRACE_MS`. */
export async function mintInspectionToken(runnerSecret: string, scope: InspectionScope, timeoutSeconds: number, now = Date.now()): Promise<string> {
  const claims: z.infer<typeof ClaimsSchema> = { t: scope.tenant, s: scope.session, c: scope.call, e: now + timeoutSeconds * 1000 + INSPECTION_GRACE_MS };
  const body = toBase64Url(encoder.encode(JSON.stringify(claims)));
  const mac = await crypto.subtle.sign("HMAC", await signingKey(runnerSecret), encoder.encode(body));
  return `${PREFIX}${body}.${toBase64Url(new Uint8Array(mac))}`;
}

/** The scope of a valid, unexpired token; undefined for anything else. */
export async function verifyInspectionToken(runnerSecret: string, token: string, now = Date.now()): Promise<InspectionScope | undefined> {
  if (!isInspectionToken(token)) return undefined;
  const [body, mac, ...rest] = token.slice(PREFIX.length).split(".");
  if (!body || !mac || rest.length > 0) return undefined;
  const sig = fromBase64Url(mac);
  if (!sig) return undefined;
  const ok = await crypto.subtle.verify("HMAC", await signingKey(runnerSecret), sig, encoder.encode(body));
  if (!ok) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(fromBase64Url(body)!));
  } catch {
    return undefined;
  }
  const claims = ClaimsSchema.safeParse(json);
  if (!claims.success || claims.data.e <= now) return undefined;
  return { tenant: claims.data.t, session: claims.data.s, call: claims.data.c };
}
