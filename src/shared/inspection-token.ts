/**
 * Inspection tokens (spec Authentication 8, docs/api.md "Tools"): short-lived, read-only, scoped to one
 * session and one tool call. Minted by the runner-host that dispatches an `inspect_session` tool
 * call and verified by the Worker; both hold the runner secret, from which the signing key is
 * derived, so no round trip is needed to mint one. The Worker also asks the session whether the
 * call is still open: a token stops working once the call's result is recorded.
 *
 * Format: `svci.<base64url(JSON {t, s, c, e})>.<base64url(HMAC-SHA256)>` — tenant, session id,
 * call id, expiry (ms since epoch).
 */

export const INSPECTION_PREFIX = "svci.";
/** Valid for the tool call's timeout plus this grace, ms (docs/api.md "Tools"). */
export const INSPECTION_GRACE_MS = 60_000;

export type InspectionClaims = { t: string; s: string; c: string; e: number };

import { fromBase64Url, toBase64Url } from "./base64.ts";

const encoder = new TextEncoder();

async function signingKey(runnerSecret: string): ReturnType<typeof crypto.subtle.importKey> {
  const base = await crypto.subtle.importKey("raw", encoder.encode(runnerSecret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const derived = await crypto.subtle.sign("HMAC", base, encoder.encode("svc inspection token v1"));
  return crypto.subtle.importKey("raw", derived, { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
}

export async function mintInspectionToken(runnerSecret: string, claims: InspectionClaims): Promise<string> {
  const body = toBase64Url(encoder.encode(JSON.stringify(claims)));
  const mac = await crypto.subtle.sign("HMAC", await signingKey(runnerSecret), encoder.encode(body));
  return `${INSPECTION_PREFIX}${body}.${toBase64Url(new Uint8Array(mac))}`;
}

/** The claims of a valid, unexpired token; undefined for anything else. */
export async function verifyInspectionToken(runnerSecret: string, token: string, now = Date.now()): Promise<InspectionClaims | undefined> {
  if (!token.startsWith(INSPECTION_PREFIX)) return undefined;
  const [body, mac] = token.slice(INSPECTION_PREFIX.length).split(".");
  if (!body || !mac) return undefined;
  const sig = fromBase64Url(mac);
  if (!sig) return undefined;
  const ok = await crypto.subtle.verify("HMAC", await signingKey(runnerSecret), sig, encoder.encode(body));
  if (!ok) return undefined;
  try {
    const c = JSON.parse(new TextDecoder().decode(fromBase64Url(body)!)) as InspectionClaims;
    if (typeof c.t !== "string" || typeof c.s !== "string" || typeof c.c !== "string" || typeof c.e !== "number") return undefined;
    return c.e > now ? c : undefined;
  } catch {
    return undefined;
  }
}
