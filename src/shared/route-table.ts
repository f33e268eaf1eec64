/**
 * Every route of the HTTP interface. A new route plugs in by adding its contract to one of these
 * lists (or a new list here); the OpenAPI document, the Worker's route labels and the response
 * validation of the tests follow.
 */
import type { RouteContract } from "./route-contract.ts";
import { EXECUTOR_ROUTES } from "./routes-executors.ts";
import { SERVICE_ROUTES } from "./routes-service.ts";
import { SESSION_ROUTES } from "./routes-sessions.ts";
import { SYNC_ROUTES } from "./routes-sync.ts";

export const ROUTES: readonly RouteContract[] = [...SESSION_ROUTES, ...SYNC_ROUTES, ...EXECUTOR_ROUTES, ...SERVICE_ROUTES];

/** Path parameters `id` match `^[a-fA-F0-9]{32}$` (docs/api.md "Authentication" 2). */
const ID_SEGMENT = "[a-fA-F0-9]{32}";

const matchers = ROUTES.map((r) => ({
  route: r,
  re: new RegExp(`^${r.path.replace(/\{[a-z_]+\}/g, ID_SEGMENT).replace(/\./g, "\\.")}/?$`),
}));

/** The route a request path and method reach, if any (a trailing slash is tolerated). */
export function matchRoute(method: string, path: string): RouteContract | undefined {
  const m = method.toLowerCase();
  return matchers.find((x) => x.route.method === m && x.re.test(path))?.route;
}
