/**
 * The one error vocabulary of the service (docs/api.md "Errors").
 * Runtime-neutral: imported by the Worker, the objects and the runner-host.
 */

export const ERROR_STATUS = {
  invalid_request: 400,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  cursor_unavailable: 409,
  unsupported: 422,
  overloaded: 429,
  service_error: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export type ErrorBody = { code: ErrorCode; message: string; /** Only where it differs from the code's usual one (401, 413). */ status?: number };

/**
 * Object RPC methods return this instead of throwing: Workers RPC keeps an error's message but
 * drops its own properties, so a thrown `code` would be lost on the way back to the Worker.
 */
export type Result<T> = { ok: true; value: T } | { ok: false; error: ErrorBody };

/**
 * The error type. `status` defaults from the code; 401 and 413 are the irregular cases (code
 * `forbidden` with 401, code `invalid_request` with 413; docs/api.md "Errors").
 */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, status?: number, headers: Record<string, string> = {}) {
    super(message);
    this.name = "ServiceError";
    this.code = code;
    this.status = status ?? ERROR_STATUS[code];
    this.headers = headers;
  }

  static from(body: ErrorBody): ServiceError {
    if (body.code === "overloaded") return overloaded(body.message);
    if (body.status === 401) return unauthorized(body.message);
    return new ServiceError(body.code, body.message, body.status);
  }

  toBody(): ErrorBody {
    const b: ErrorBody = { code: this.code, message: this.message };
    if (this.status !== ERROR_STATUS[this.code]) b.status = this.status;
    return b;
  }
}

export const invalid = (message: string) => new ServiceError("invalid_request", message);
export const forbidden = (message: string) => new ServiceError("forbidden", message);
export const notFound = (message = "not found") => new ServiceError("not_found", message);
export const conflict = (message: string) => new ServiceError("conflict", message);
export const unsupported = (message: string) => new ServiceError("unsupported", message);
export const cursorUnavailable = (message = "cursor is not available") =>
  new ServiceError("cursor_unavailable", message);
export const unauthorized = (message = "missing or unrecognized bearer token") =>
  new ServiceError("forbidden", message, 401, { "WWW-Authenticate": "Bearer" });
export const tooLarge = (limit: number) =>
  new ServiceError("invalid_request", `request body is larger than ${limit} bytes`, 413);
/** Out of capacity is always `429` with `Retry-After: 1` (docs/api.md "Limits"). */
export const overloaded = (message: string) => new ServiceError("overloaded", message, 429, { "Retry-After": "1" });

/** Runs `fn` and turns a thrown ServiceError into a Result; anything else is rethrown (a real 500). */
export function asResult<T>(fn: () => T): Result<T> {
  try {
    return { ok: true, value: fn() };
  } catch (e) {
    if (e instanceof ServiceError) return { ok: false, error: e.toBody() };
    throw e;
  }
}

export async function asResultAsync<T>(fn: () => Promise<T>): Promise<Result<T>> {
  try {
    return { ok: true, value: await fn() };
  } catch (e) {
    if (e instanceof ServiceError) return { ok: false, error: e.toBody() };
    throw e;
  }
}

/** Unwraps an RPC Result on the calling side, restoring the typed error. */
export function unwrap<T>(r: Result<T>): T {
  if (r.ok) return r.value;
  throw ServiceError.from(r.error);
}
