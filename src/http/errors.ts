/** The one place where errors become HTTP responses (docs/api.md "Errors"). */
import { HTTPException } from "hono/http-exception";
import { ServiceError } from "../shared/errors.ts";
import { log } from "../log.ts";

export function errorResponse(err: unknown, requestId: string, route: string): Response {
  const e = toServiceError(err);
  if (e.status >= 500) {
    // The cause is logged with the request id; the client only ever sees the generic message.
    log("error", "request failed", {
      request_id: requestId,
      route,
      error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
    });
  }
  const body = { error: publicError(e), request_id: requestId };
  return new Response(JSON.stringify(body), {
    status: e.status,
    headers: { "Content-Type": "application/json", ...e.headers },
  });
}

/**
 * What a client is told of an error. A typed 5xx (storage unreadable, a stored manifest that names
 * another session) says what broke to the log, not to the tenant: its message may name storage
 * paths or hosts.
 */
export function publicError(e: ServiceError): { code: ServiceError["code"]; message: string } {
  return { code: e.code, message: e.status >= 500 ? "internal server error" : e.message };
}

export function toServiceError(err: unknown): ServiceError {
  if (err instanceof ServiceError) return err;
  if (err instanceof HTTPException && err.status < 500) {
    return new ServiceError(err.status === 404 ? "not_found" : "invalid_request", err.message || "invalid request", err.status);
  }
  return new ServiceError("service_error", "internal server error");
}
