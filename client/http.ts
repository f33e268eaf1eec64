/**
 * The client's request layer: bearer auth, JSON bodies, the service's error shape as `ApiError`,
 * and `Retry-After` on `429` (the service never retries by itself; docs/api.md "Errors" asks clients
 * to wait and retry, reusing the idempotency key, which a retried request body does as it is sent
 * unchanged).
 */

export type ClientOptions = {
  /** The service's base URL, e.g. `http://127.0.0.1:8080` (no trailing slash needed). */
  baseUrl: string;
  /** Bearer token: an access token, or an executor credential for the executor endpoints. */
  token?: string;
  /** How many times a `429` is retried after its `Retry-After` (default 3; 0 turns retries off). */
  retries?: number;
  /** A fetch implementation (default: the global one). */
  fetch?: typeof fetch;
};

/** Ceiling on one `Retry-After` wait, ms: the service sends `1`; a larger value is not waited out. */
const MAX_RETRY_AFTER_MS = 30_000;
/**
 * Retries of a request the service answered `429`: a capacity refusal clears within seconds, and
 * three waits of its `Retry-After` (1 s) cover that without hiding a lasting overload.
 */
const DEFAULT_RETRIES = 3;

/** An error answer of the service: `status`, `code` and `message` from its body, `requestId` from `X-Request-ID`. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly requestId: string | undefined;
  /** Seconds from `Retry-After` (on `429`). */
  readonly retryAfter: number | undefined;

  constructor(status: number, code: string, message: string, requestId: string | undefined, retryAfter: number | undefined) {
    super(`${status} ${code}: ${message}`);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.requestId = requestId;
    this.retryAfter = retryAfter;
  }

  static async from(res: Response): Promise<ApiError> {
    const text = await res.text();
    let code = "unknown";
    let message = text.slice(0, 200) || res.statusText;
    try {
      const body = JSON.parse(text) as { error?: { code?: string; message?: string } };
      code = body.error?.code ?? code;
      message = body.error?.message ?? message;
    } catch {
      // Not the service's error shape (a proxy in between): keep the text.
    }
    return new ApiError(res.status, code, message, res.headers.get("X-Request-ID") ?? undefined, retryAfterSeconds(res));
  }
}

export function retryAfterSeconds(res: Response): number | undefined {
  const v = res.headers.get("Retry-After");
  if (v === null || !/^[0-9]+$/.test(v.trim())) return undefined;
  return Number(v.trim());
}

/** Waits `ms`, or rejects when `signal` aborts first. */
export function wait(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export type RequestOptions = {
  body?: unknown;
  query?: Record<string, string | number | undefined>;
  headers?: Record<string, string>;
  signal?: AbortSignal;
};

export class Transport {
  readonly baseUrl: string;
  readonly token: string | undefined;
  readonly #retries: number;
  readonly #fetch: typeof fetch;

  constructor(o: ClientOptions) {
    const base = URL.parse(o.baseUrl);
    // Paths are appended to the text: a query or fragment would swallow them.
    if (!base || (base.protocol !== "http:" && base.protocol !== "https:") || o.baseUrl.includes("?") || o.baseUrl.includes("#")) {
      throw new TypeError(`baseUrl must be an http(s) URL without a query or fragment, got ${JSON.stringify(o.baseUrl)}`);
    }
    this.baseUrl = o.baseUrl.replace(/\/+$/, "");
    this.token = o.token;
    this.#retries = o.retries ?? DEFAULT_RETRIES;
    this.#fetch = o.fetch ?? globalThis.fetch.bind(globalThis);
  }

  url(path: string, query: RequestOptions["query"] = {}): string {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, String(v));
    const s = q.toString();
    return `${this.baseUrl}${path}${s ? `?${s}` : ""}`;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { ...extra };
    if (this.token !== undefined) h.Authorization = `Bearer ${this.token}`;
    return h;
  }

  /** One plain request with this client's fetch (streams use it; no retry). */
  raw(url: string, init: RequestInit): Promise<Response> {
    return this.#fetch(url, init);
  }

  /** Sends the request; a `429` is retried after `Retry-After` up to `retries` times. */
  async fetch(method: string, path: string, o: RequestOptions = {}): Promise<Response> {
    const headers = this.headers(o.headers);
    let body: string | undefined;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers["Content-Type"] = "application/json";
    }
    for (let attempt = 0; ; attempt++) {
      const res = await this.#fetch(this.url(path, o.query), { method, headers, body, signal: o.signal });
      const after = res.status === 429 ? retryAfterSeconds(res) : undefined;
      if (after === undefined || attempt >= this.#retries || after * 1000 > MAX_RETRY_AFTER_MS) return res;
      await res.body?.cancel();
      await wait(after * 1000, o.signal);
    }
  }

  /** A JSON request whose success body is `T`; error answers throw `ApiError`. */
  async json<T>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
    const res = await this.fetch(method, path, o);
    if (!res.ok) throw await ApiError.from(res);
    return (await res.json()) as T;
  }
}
