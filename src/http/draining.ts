/**
 * Shutdown (docs/api.md "Shutdown and readiness": on SIGINT or SIGTERM the service stops accepting
 * new work). New work is refused with `429 overloaded`, and readiness fails, once either
 * - this isolate was told the stack is shutting down (`POST /internal/drain`, the local stack's
 *   first step on a signal: at once, before its runner-host drains), or
 * - every connected runner-host is draining, as read from the isolate's fleet snapshot
 *   (src/runner/fleet.ts), so a busy Worker does not ask the pools on every request.
 *
 * Lifecycle: isolate memory. A drained isolate stays drained: the local stack stops its runtime next.
 */
import { overloaded } from "../shared/errors.ts";
import { fleetStatus, fleetSummary } from "../runner/fleet.ts";
import type { AppContext } from "./context.ts";

let shuttingDown = false;

/** This isolate's stack is shutting down (the local stack's signal). */
export function beginShutdown(): void {
  shuttingDown = true;
}

export function isShuttingDown(): boolean {
  return shuttingDown;
}

export async function refuseWhenDraining(c: AppContext): Promise<void> {
  if (await isDraining(c)) throw overloaded("the service is shutting down");
}

/** Whether new work is refused now (what `refuseWhenDraining` throws for). */
export async function isDraining(c: AppContext): Promise<boolean> {
  return shuttingDown || fleetSummary(await fleetStatus(c.env, c.get("runtime").config)).draining;
}
