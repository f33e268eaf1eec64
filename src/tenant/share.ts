/**
 * How much of a deployment-wide cap one tenant may hold (`limits.subscribers`, `persistence.queue`),
 * so no tenant can use up a capacity every tenant needs. Pure, so it is tested in Node.
 */
import type { HostConfig } from "../shared/config-schema.ts";

/**
 * Part of the cap one tenant may hold when several tenants are configured: three quarters, so one
 * tenant can never take all of it from the others — from a cap of 4 on (rounded up, 3/4 of a
 * smaller cap is all of it). With one tenant it may hold the whole cap.
 */
export function tenantShare(cap: number, tenants: number): number {
  return tenants <= 1 ? cap : Math.max(1, Math.ceil((cap * 3) / 4));
}

/** The tenants the configuration's tokens name. */
export function configuredTenants(config: HostConfig): number {
  return new Set(config.tokens.map((t) => t.tenant)).size;
}
