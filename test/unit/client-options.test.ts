import { describe, expect, it } from "vitest";
import { ApiError, SvcClient } from "../../client/index.ts";

/** A fetch that answers every request with `429` and records what it was asked. */
function refusingFetch(): { fetch: typeof fetch; calls: { url: string; auth: string | null }[] } {
  const calls: { url: string; auth: string | null }[] = [];
  const fake = (async (input: string | URL | Request, init?: RequestInit) => {
    calls.push({ url: String(input), auth: new Headers(init?.headers).get("Authorization") });
    return new Response(JSON.stringify({ error: { code: "overloaded", message: "full" }, request_id: "r" }), {
      status: 429,
      headers: { "Content-Type": "application/json", "Retry-After": "0" },
    });
  }) as typeof fetch;
  return { fetch: fake, calls };
}

describe("the typed client's withToken", () => {
  it("keeps the base URL, the fetch and the retries, and changes only the token", async () => {
    const f = refusingFetch();
    const svc = new SvcClient({ baseUrl: "http://svc.test/", token: "first", fetch: f.fetch, retries: 1 });
    const other = svc.withToken("second");
    await expect(other.listSessions()).rejects.toBeInstanceOf(ApiError);
    // retries 1: the first try and one retry, both through the given fetch, with the new token.
    expect(f.calls).toEqual([
      { url: "http://svc.test/sessions", auth: "Bearer second" },
      { url: "http://svc.test/sessions", auth: "Bearer second" },
    ]);
    await expect(svc.listSessions()).rejects.toBeInstanceOf(ApiError);
    expect(f.calls.slice(2).map((c) => c.auth)).toEqual(["Bearer first", "Bearer first"]);
  });
});

describe("the typed client's sendMessage", () => {
  it("sends the key it is given, an empty one too (the service refuses it: 400), and none when not given", async () => {
    const bodies: unknown[] = [];
    const fetch = (async (_input: string | URL | Request, init?: RequestInit) => {
      bodies.push(JSON.parse(String(init?.body)));
      return new Response(JSON.stringify({ error: { code: "invalid_request", message: "key: too short" }, request_id: "r" }), {
        status: 400,
        headers: { "Content-Type": "application/json" },
      });
    }) as typeof globalThis.fetch;
    const svc = new SvcClient({ baseUrl: "http://svc.test", token: "t", fetch });
    await expect(svc.sendMessage("a".repeat(32), "pay once", { key: "" })).rejects.toMatchObject({ status: 400, code: "invalid_request" });
    await expect(svc.sendMessage("a".repeat(32), "no key")).rejects.toBeInstanceOf(ApiError);
    expect(bodies).toEqual([
      { type: "user.message", text: "pay once", key: "" },
      { type: "user.message", text: "no key" },
    ]);
  });
});
