/**
 * `svc.http.*` for every request the Worker answers: counted by route template, method and status;
 * timed by route and method (SSE streams are counted, not timed: their length is the client's);
 * error answers counted by error code. Routes outside the contract share the label `other`, so a
 * scanner's random paths cannot grow the label set.
 */
import type { MiddlewareHandler } from "hono";
import { metrics } from "../metrics/registry.ts";
import { scheduleExport } from "../metrics/exporter.ts";
import { matchRoute } from "../shared/route-table.ts";
import type { AppEnv } from "./context.ts";
import { toServiceError } from "./errors.ts";

export const httpMetrics: MiddlewareHandler<AppEnv> = async (c, next) => {
  const t0 = performance.now();
  await next();
  const route = matchRoute(c.req.method, c.req.path)?.path ?? "other";
  const method = c.req.method;
  const status = c.res.status;
  metrics.counter("svc.http.requests").add(1, { route, method, status: String(status) });
  if (!(c.res.headers.get("Content-Type") ?? "").startsWith("text/event-stream")) {
    metrics.histogram("svc.http.duration").record(performance.now() - t0, { route, method });
  }
  if (status >= 400 && c.error !== undefined) metrics.counter("svc.http.rejected").add(1, { code: toServiceError(c.error).code });
  try {
    const ctx = c.executionCtx;
    scheduleExport(c.env, (p) => ctx.waitUntil(p));
  } catch {
    // No execution context (an app called directly in a test): nothing can keep a timer alive.
  }
};
