/**
 * RunnerPool objects are per region: placement, control sockets and status requests of one region
 * never queue behind another's. The default region keeps the name the single pool always had.
 */
import { DEFAULT_REGION, type HostConfig } from "../shared/config-schema.ts";

export function poolName(region: string): string {
  return region === DEFAULT_REGION ? "default" : `region:${region}`;
}

/** The pool of a deployment that configures no regions. */
export const POOL_NAME = poolName(DEFAULT_REGION);

/** The regions runner-hosts may announce, in configuration order ("default" when none are). */
export function configuredRegions(config: HostConfig): string[] {
  const names = Object.keys(config.runners?.regions ?? {});
  return names.length > 0 ? names : [DEFAULT_REGION];
}
