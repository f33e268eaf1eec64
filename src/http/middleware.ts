import type { MiddlewareHandler } from "hono";
import { newId } from "../shared/ids.ts";
import { getRuntime } from "../runtime.ts";
import type { AppEnv } from "./context.ts";

/**
 * Every response carries a service-generated `X-Request-ID` (32 hex; a client-sent one is
 * ignored) and `nosniff`, WebSocket `101` responses included.
 */
export const requestContext: MiddlewareHandler<AppEnv> = async (c, next) => {
  const requestId = newId();
  c.set("requestId", requestId);
  c.set("runtime", await getRuntime(c.env));
  await next();
  c.res = withStandardHeaders(c.res, requestId);
};

export function withStandardHeaders(res: Response, requestId: string): Response {
  try {
    res.headers.set("X-Request-ID", requestId);
    res.headers.set("X-Content-Type-Options", "nosniff");
    return res;
  } catch {
    // Responses passed through from an object have immutable headers: copy them.
    const headers = new Headers(res.headers);
    headers.set("X-Request-ID", requestId);
    headers.set("X-Content-Type-Options", "nosniff");
    return new Response(res.body, { status: res.status, statusText: res.statusText, headers, webSocket: res.webSocket });
  }
}
