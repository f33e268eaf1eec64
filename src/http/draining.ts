/**
 * Shutdown (spec "Operational behaviour"): while every connected runner-host is draining, new work
 * is refused with `429 overloaded`. The pool's answer is cached briefly per isolate so a busy
 * Worker does not ask the pool on every request.
 */
import { overloaded } from "../shared/errors.ts";
import { POOL_NAME } from "../runner/pool-name.ts";
import type { AppContext } from "./context.ts";

/** How long an isolate trusts the pool's draining flag, ms. */
const CACHE_MS = 250;

let cached: { at: number; draining: boolean } | undefined;

export async function refuseWhenDraining(c: AppContext): Promise<void> {
  if (!cached || Date.now() - cached.at > CACHE_MS) {
    const status = await c.env.RUNNERS.getByName(POOL_NAME).status();
    cached = { at: Date.now(), draining: status.draining };
  }
  if (cached.draining) throw overloaded("the service is shutting down");
}
