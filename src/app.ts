/** The Hono app: middleware order, route mounts, and the single error exit. */
import { Hono } from "hono";
import type { AppEnv } from "./http/context.ts";
import { discardUnreadBody } from "./http/body.ts";
import { errorResponse } from "./http/errors.ts";
import { trackInFlight } from "./http/in-flight.ts";
import { httpMetrics } from "./http/metrics.ts";
import { requestContext, withStandardHeaders } from "./http/middleware.ts";
import { noSuchRoute, refuseHeadOnStreams } from "./http/route-methods.ts";
import { newId } from "./shared/ids.ts";
import { catalog } from "./routes/catalog.ts";
import { executors } from "./routes/executors.ts";
import { health } from "./routes/health.ts";
import { internal } from "./routes/internal.ts";
import { openapi } from "./routes/openapi.ts";
import { sessions } from "./routes/sessions.ts";

export const app = new Hono<AppEnv>();

app.use("*", trackInFlight);
app.use("*", httpMetrics);
app.use("*", requestContext);
app.use("*", discardUnreadBody);
app.use("*", refuseHeadOnStreams);
app.route("/health", health);
app.route("/", openapi);
app.route("/sessions", sessions);
app.route("/catalog", catalog);
app.route("/executors", executors);
app.route("/internal", internal);

app.notFound((c) => {
  throw noSuchRoute(c.req.method, c.req.path);
});

app.onError((err, c) => {
  const requestId = c.get("requestId") ?? newId();
  return withStandardHeaders(errorResponse(err, requestId, c.req.routePath ?? c.req.path), requestId);
});
