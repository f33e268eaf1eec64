/**
 * Finding a session before addressing its object (docs/api.md "Flush, sync, restore": a session in
 * storage is loaded by any request naming it): addressing a Durable
 * Object creates its storage, so a lookup of an id that exists nowhere must not reach one. The
 * tenant index answers for sessions of this deployment; with persistence, a session it lacks is
 * looked up in external storage (`latest.json`), loaded into its object and then indexed.
 *
 * Known sessions are remembered per isolate (a session never stops existing), so a hot session
 * costs no index call.
 */
import type { Env } from "../env.ts";
import type { Runtime } from "../runtime.ts";
import { notFound, ServiceError, unwrap } from "../shared/errors.ts";
import { sessionObjectName } from "../session/object-name.ts";
import { Layout } from "./layout.ts";
import { openStore } from "./open-store.ts";

/** Object names remembered as existing, per isolate; cleared when full (a bound on memory). */
const KNOWN_MAX = 10_000;
const known = new Set<string>();

function remember(name: string): void {
  if (known.size >= KNOWN_MAX) known.clear();
  known.add(name);
}

/** The session's object, or `404 not_found` with nothing written anywhere. */
export async function existingSession(env: Env, rt: Runtime, tenant: string, id: string) {
  const name = sessionObjectName(tenant, id);
  const stub = env.SESSIONS.getByName(name);
  if (known.has(name)) return stub;
  const index = env.TENANTS.getByName(tenant);
  if (await index.has(id)) {
    remember(name);
    return stub;
  }
  const p = rt.config.persistence;
  if (!p) throw notFound("session not found");
  const layout = await Layout.of(p.prefix, tenant, id);
  let stored: Uint8Array | null;
  try {
    stored = await openStore(env, p, rt.vars).get(layout.latest());
  } catch (e) {
    throw new ServiceError("service_error", `external storage could not be read: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!stored) throw notFound("session not found");
  // Indexed only once loaded: a load that fails is tried again by the next request.
  if (!unwrap(await stub.load(tenant, id))) throw notFound("session not found");
  await index.reserve(id);
  remember(name);
  return stub;
}

/** Reserves a new session's id in its tenant's index before its object is created. */
export async function reserveSession(env: Env, tenant: string, id: string): Promise<void> {
  await env.TENANTS.getByName(tenant).reserve(id);
  remember(sessionObjectName(tenant, id));
}
