/**
 * Shutdown (spec "Operational behaviour"): while every connected runner-host is draining, new work
 * is refused with `429 overloaded`. Read from the isolate's fleet snapshot (src/runner/fleet.ts),
 * so a busy Worker does not ask the pools on every request.
 */
import { overloaded } from "../shared/errors.ts";
import { fleetStatus, fleetSummary } from "../runner/fleet.ts";
import type { AppContext } from "./context.ts";

export async function refuseWhenDraining(c: AppContext): Promise<void> {
  if (fleetSummary(await fleetStatus(c.env, c.get("runtime").config)).draining) throw overloaded("the service is shutting down");
}
