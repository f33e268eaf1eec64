/**
 * The runner-hosts of every region as this isolate last saw them: one status call per regional
 * RunnerPool, shared by readiness probes, the shutdown check and the choice of a new session's
 * home region, and reused for `FLEET_CACHE_MS`. So a probe or a create costs no pool request most
 * of the time, and a pool sees at most one status call per isolate per period however busy the
 * Worker is.
 */
import type { Env } from "../env.ts";
import type { HostConfig, LocationHint } from "../shared/config-schema.ts";
import { configuredRegions, poolName } from "./pool-name.ts";
import type { PoolStatus } from "./runner-pool.ts";

/** How long an isolate trusts its fleet snapshot, ms: runner-hosts come and go in seconds. */
export const FLEET_CACHE_MS = 1_000;

export type RegionStatus = PoolStatus & { region: string };

let cached: { at: number; config: HostConfig; regions: Promise<RegionStatus[]> } | undefined;

export function fleetStatus(env: Env, config: HostConfig, maxAgeMs = FLEET_CACHE_MS): Promise<RegionStatus[]> {
  if (cached && cached.config === config && Date.now() - cached.at <= maxAgeMs) return cached.regions;
  const regions = Promise.all(
    configuredRegions(config).map(async (region) => ({ region, ...(await env.RUNNERS.getByName(poolName(region)).status()) })),
  );
  const entry = { at: Date.now(), config, regions };
  cached = entry;
  // A failed call is not cached: the next caller asks again.
  regions.catch(() => {
    if (cached === entry) cached = undefined;
  });
  return regions;
}

/** Ready: some runner-host anywhere takes work. Draining: runner-hosts exist and all drain. */
export function fleetSummary(regions: readonly RegionStatus[]): { ready: boolean; draining: boolean } {
  const runners = regions.reduce((n, r) => n + r.runners, 0);
  const ready = regions.reduce((n, r) => n + r.ready, 0);
  return { ready: ready > 0, draining: runners > 0 && ready === 0 };
}

/**
 * A new session's home region: among regions whose ready runner-hosts serve the harness, the one
 * with the most free room (configuration order breaks ties); with none, the first region.
 */
export function chooseHomeRegion(regions: readonly RegionStatus[], harness: string): string {
  let best: RegionStatus | undefined;
  for (const r of regions) if (r.harnesses.includes(harness) && (!best || r.free > best.free)) best = r;
  return (best ?? regions[0])?.region ?? "default";
}

/** Where a region's session objects are created, when the configuration says. */
export function locationHint(config: HostConfig, region: string): LocationHint | undefined {
  return config.runners?.regions[region]?.location_hint;
}

/** Regions to try when placing a session: its home first, then the others in configuration order. */
export function placementOrder(config: HostConfig, home: string): string[] {
  const all = configuredRegions(config);
  return all.includes(home) ? [home, ...all.filter((r) => r !== home)] : all;
}
