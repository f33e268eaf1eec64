/**
 * How one HTTP route is declared in the contract: method, path template, who may call it, what it
 * takes and every answer it gives. The route table (route-table.ts) is a list of these; the OpenAPI
 * generator, the Worker's metrics (route labels) and the tests' response validation all read it, so
 * a route is described once, next to its schemas.
 */
import type * as z from "zod";

/** Who may call: no token, any valid token, a non-read-only one, `manage`, or an executor credential. */
export type Access = "public" | "token" | "write" | "manage" | "executor";

/** Response headers the contract names beyond the ones every response carries. */
export type ResponseHeader = "Retry-After" | "WWW-Authenticate";

export type ResponseSpec = {
  description: string;
  /** `application/json` body: one registered schema, or several (the body is one of them). */
  json?: z.ZodType | z.ZodType[];
  /** `text/event-stream` body: the registered schema of one frame. */
  sse?: z.ZodType;
  /** A `101 Switching Protocols` with no body. */
  upgrade?: true;
  headers?: ResponseHeader[];
};

export type Param = { schema: z.ZodType; description: string; required?: boolean };

export type RouteContract = {
  method: "get" | "post";
  /** OpenAPI path template, e.g. `/sessions/{id}/events`. Every `{name}` is a 32-hex id. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  access: Access;
  query?: Record<string, Param>;
  /** Request headers the route reads (`Authorization` is declared by `access`). */
  headers?: Record<string, Param>;
  /** `application/json` request body; `optional` when an empty body is accepted. */
  body?: { schema: z.ZodType; optional?: boolean };
  /** Success answers by status. */
  responses: Record<number, ResponseSpec>;
  /** Error statuses this route can answer with (body ErrorResponse). */
  errors: number[];
};

/** What each error status means, for the document (docs/api.md "Errors"). */
export const ERROR_MEANING: Record<number, { description: string; headers?: ResponseHeader[] }> = {
  400: { description: "`invalid_request`: malformed or invalid input." },
  401: { description: "`forbidden`: missing or unrecognized bearer token.", headers: ["WWW-Authenticate"] },
  403: { description: "`forbidden`: the token may not do this." },
  404: { description: "`not_found`: unknown route or resource (another tenant's looks the same)." },
  409: { description: "`conflict` (wrong state, key reused with other input) or `cursor_unavailable`." },
  413: { description: "`invalid_request`: body over `limits.input_bytes` + 16384 bytes." },
  422: { description: "`unsupported`: the service is not configured for this." },
  429: { description: "`overloaded`: out of capacity or shutting down. Wait and retry.", headers: ["Retry-After"] },
  500: { description: "`service_error`: unexpected failure; the message is `internal server error`." },
  503: { description: "Not ready." },
};

/** Error statuses shared by groups of routes. */
export const ON_SESSION = [401, 403, 404, 500];
export const WITH_BODY = [400, 413];
