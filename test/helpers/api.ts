/**
 * HTTP helpers for end-to-end tests: requests with a bearer token and the error-shape check. Every
 * response is validated against the OpenAPI contract (status, headers, body) before it is returned.
 */
import { expect } from "vitest";
import { EventSourceParserStream } from "eventsource-parser/stream";
import { recordViolation, validateFrame, validateResponse, validateStreamHead } from "./contract.ts";

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

/** The error shape of docs/api.md "Every response", with `request_id` equal to the header. */
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

/**
 * `fetch` for the typed client in e2e tests and benches: every response is checked against the
 * contract like `call`'s, and every frame of an event stream as it passes (violations fail the test
 * through the e2e setup).
 */
export const checkedFetch: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  const method = init?.method ?? "GET";
  const url = String(input);
  if (res.status === 200 && (res.headers.get("content-type") ?? "").startsWith("text/event-stream") && res.body) {
    let media: ReturnType<typeof validateStreamHead> | undefined;
    recordViolation(() => (media = validateStreamHead(method, url, res.status, res.headers)));
    if (!media) return res;
    const [mine, theirs] = res.body.tee();
    void (async () => {
      const reader = theirs.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        recordViolation(() => validateFrame(media!, value));
      }
    })().catch(() => {
      // The stream was cut or aborted: the client's side sees the same.
    });
    return new Response(mine, { status: res.status, statusText: res.statusText, headers: res.headers });
  }
  const text = await res.clone().text();
  recordViolation(() => validateResponse({ method, url, status: res.status, headers: res.headers, text }));
  return res;
};
