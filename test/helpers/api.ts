/**
 * HTTP helpers for end-to-end tests: requests with a bearer token and the error-shape check. Every
 * response is validated against the OpenAPI contract (status, headers, body) before it is returned.
 */
import { expect } from "vitest";
import { validateResponse } from "./contract.ts";

export type Reply = { status: number; headers: Headers; body: any; text: string };

export async function call(
  base: string,
  method: string,
  path: string,
  o: { token?: string; body?: unknown; raw?: string | ReadableStream<Uint8Array>; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...o.headers };
  if (o.token !== undefined) headers.Authorization = `Bearer ${o.token}`;
  let body: RequestInit["body"];
  if (o.raw !== undefined) body = o.raw;
  else if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers["Content-Type"] = "application/json";
  }
  const res = await fetch(`${base}${path}`, { method, headers, body, duplex: "half" } as RequestInit);
  const text = await res.text();
  validateResponse({ method, url: `${base}${path}`, status: res.status, headers: res.headers, text });
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

/** Every response: a 32-hex X-Request-ID and nosniff. */
export function expectStandardHeaders(r: Reply): void {
  expect(r.headers.get("x-request-id")).toMatch(/^[0-9a-f]{32}$/);
  expect(r.headers.get("x-content-type-options")).toBe("nosniff");
}

/** The spec's error shape, with `request_id` equal to the header. */
export function expectApiError(r: Reply, status: number, code: string): void {
  expect({ status: r.status, code: r.body?.error?.code, text: r.text }).toMatchObject({ status, code });
  expect(typeof r.body.error.message).toBe("string");
  expect(r.body.error.message.length).toBeGreaterThan(0);
  expect(Object.keys(r.body).sort()).toEqual(["error", "request_id"]);
  expect(Object.keys(r.body.error).sort()).toEqual(["code", "message"]);
  expectStandardHeaders(r);
  expect(r.body.request_id).toBe(r.headers.get("x-request-id"));
  if (status === 401) expect(r.headers.get("www-authenticate")).toBe("Bearer");
  if (status === 429) expect(r.headers.get("retry-after")).toBe("1");
}
