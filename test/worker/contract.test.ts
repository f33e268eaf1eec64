/**
 * The Worker against its route table: `GET /openapi.json` is public and is the generated document,
 * and every route of the table is served (an unauthenticated call gets an answer the contract
 * lists for it, never the unknown-route 404 of a path the app lacks).
 */
import { describe, expect, it } from "vitest";
import { openApiText } from "../../src/shared/openapi.ts";
import { ROUTES } from "../../src/shared/route-table.ts";
import { api, createSession } from "./helpers.ts";

describe("the published contract", () => {
  it("GET /openapi.json needs no token and serves the generated OpenAPI 3.1 document", async () => {
    const res = await api("/openapi.json", { token: "" });
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toMatch(/^application\/json/);
    expect(res.headers.get("X-Request-ID")).toMatch(/^[0-9a-f]{32}$/);
    const text = await res.text();
    expect(text).toBe(openApiText());
    expect(JSON.parse(text).info.version).toBe("current");
  });

  it("answers every route of the table without a token as the contract says", async () => {
    const id = "a".repeat(32);
    for (const r of ROUTES) {
      const res = await api(r.path.replace("{id}", id), { method: r.method.toUpperCase(), token: "" });
      const body = await res.text();
      const listed = [...Object.keys(r.responses).map(Number), ...r.errors];
      expect(listed, `${r.method} ${r.path} → ${res.status}`).toContain(res.status);
      // Protected routes refuse before anything else; an executor's routes first look up the id
      // (docs/api.md "Executor authentication": an id naming no executor is 404, then the token),
      // after the RPC route's handshake (docs/api.md "RPC WebSocket": no upgrade is 400).
      if (r.access === "executor") expect(res.status, `${r.method} ${r.path}`).toBe(r.path.endsWith("/rpc") ? 400 : 404);
      else if (r.access !== "public") expect(res.status, `${r.method} ${r.path}`).toBe(401);
      if (r.access === "public") expect(res.status, `${r.method} ${r.path} ${body.slice(0, 100)}`).not.toBe(500);
    }
  });

  it("a method the path does not take is 404 naming the methods it takes, with Allow", async () => {
    const { id } = await createSession();
    const wrong = await api(`/sessions/${id}`, { method: "POST", body: "{}" });
    expect(wrong.status).toBe(404);
    expect(wrong.headers.get("Allow")).toBe("GET, HEAD");
    expect(await wrong.json()).toMatchObject({ error: { code: "not_found", message: "POST is not a method of /sessions/{id}; it takes GET, HEAD" } });
    const options = await api("/sessions", { method: "OPTIONS" });
    expect(options.status).toBe(404);
    expect(options.headers.get("Allow")).toBe("GET, HEAD, POST");
    expect(((await options.json()) as { error: { message: string } }).error.message).toBe("OPTIONS is not a method of /sessions; it takes GET, HEAD, POST");
    const nowhere = await api("/no-such-path", { method: "POST", body: "{}" });
    expect(nowhere.status).toBe(404);
    expect(nowhere.headers.get("Allow")).toBeNull();
    expect(((await nowhere.json()) as { error: { message: string } }).error.message).toBe("no such route");
  });

  it("HEAD is GET without the body, except where GET opens a stream: there it opens nothing", async () => {
    const live = await api("/health/live", { method: "HEAD", token: "" });
    expect(live.status).toBe(200);
    expect(await live.text()).toBe("");
    const { id } = await createSession();
    const page = await api(`/sessions/${id}`, { method: "HEAD" });
    expect(page.status).toBe(200);
    for (const path of [`/sessions/${id}/events`, `/executors/${"b".repeat(32)}/commands`, `/executors/${"b".repeat(32)}/rpc`]) {
      const head = await api(path, { method: "HEAD", headers: { Accept: "text/event-stream" } });
      expect(head.status, path).toBe(404);
      expect(head.headers.get("Allow"), path).toBe("GET");
      expect(head.headers.get("Content-Type"), path).not.toMatch(/event-stream/);
    }
  });
});
