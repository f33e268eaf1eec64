/**
 * The e2e suite's response validation (test/helpers/contract.ts) refuses what breaks the contract:
 * so a green e2e run means every response it saw matched openapi.json.
 */
import { describe, expect, it } from "vitest";
import { ContractViolation, validateFrame, validateResponse, validateStreamHead } from "../helpers/contract.ts";

const ID = "a".repeat(32);
const RID = "b".repeat(32);
const URL_ = `http://svc/sessions/${ID}`;
const std = (extra: Record<string, string> = {}) =>
  new Headers({ "content-type": "application/json", "x-request-id": RID, "x-content-type-options": "nosniff", ...extra });
const session = {
  id: ID,
  harness: "ref",
  config: { model: "openai/gpt-4o-mini", tools: [] },
  status: "idle",
  created_at: "2026-11-23T10:00:00.000Z",
  updated_at: "2026-11-23T10:00:00.000Z",
  descriptors: [],
};
const ok = (body: unknown, headers = std(), status = 200, method = "GET", url = URL_) => () =>
  validateResponse({ method, url, status, headers, text: JSON.stringify(body) });

describe("response validation against openapi.json", () => {
  it("accepts a Session as the contract shapes it", () => {
    expect(ok(session)).not.toThrow();
  });

  it("refuses a missing field, an extra field, a bad status word or a non-UTC time", () => {
    const { status: _, ...noStatus } = session;
    expect(ok(noStatus)).toThrow(ContractViolation);
    expect(ok({ ...session, secret: "x" })).toThrow(ContractViolation);
    expect(ok({ ...session, status: "sleeping" })).toThrow(ContractViolation);
    expect(ok({ ...session, created_at: "yesterday" })).toThrow(ContractViolation);
  });

  it("refuses a response without X-Request-ID or nosniff, and a status the operation does not list", () => {
    const h = std();
    h.delete("x-request-id");
    expect(ok(session, h)).toThrow(/X-Request-ID/);
    const n = std();
    n.delete("x-content-type-options");
    expect(ok(session, n)).toThrow(/X-Content-Type-Options/);
    expect(ok(session, std(), 201)).toThrow(/status not in the contract/);
  });

  it("refuses an error without the error shape, a 429 without Retry-After and a 401 without WWW-Authenticate", () => {
    const err = (code: string) => ({ error: { code, message: "m" }, request_id: RID });
    expect(ok(err("not_found"), std(), 404)).not.toThrow();
    expect(ok({ error: { code: "not_found" }, request_id: RID }, std(), 404)).toThrow(ContractViolation);
    expect(ok({ ...err("not_found"), request_id: "c".repeat(32) }, std(), 404)).toThrow(/request_id/);
    const post = (status: number, headers: Headers) => ok(err(status === 401 ? "forbidden" : "overloaded"), headers, status, "POST", `${URL_}/events`);
    expect(post(429, std())).toThrow(/Retry-After/);
    expect(post(429, std({ "retry-after": "1" }))).not.toThrow();
    expect(post(401, std())).toThrow(/WWW-Authenticate/);
  });

  it("requires 404 not_found for a route outside the contract", () => {
    expect(ok({ error: { code: "not_found", message: "no such route" }, request_id: RID }, std(), 404, "GET", "http://svc/nope")).not.toThrow();
    expect(ok({}, std(), 200, "GET", "http://svc/nope")).toThrow(/404/);
  });

  it("checks SSE frames: retained events carry their cursor as id, live-only ones carry none", () => {
    const media = validateStreamHead("GET", `${URL_}/events`, 200, std({ "content-type": "text/event-stream" }));
    const status = { id: ID, type: "session.status", time: "2026-11-23T10:00:00.000Z", data: { status: "idle" }, cursor: "c1" };
    expect(() => validateFrame(media, { id: "c1", event: "session.status", data: JSON.stringify(status) })).not.toThrow();
    expect(() => validateFrame(media, { event: "session.status", data: JSON.stringify(status) })).toThrow(ContractViolation);
    const delta = { id: ID, type: "assistant.delta", time: "2026-11-23T10:00:00.000Z", data: { text: "h" }, input_id: ID };
    expect(() => validateFrame(media, { event: "assistant.delta", data: JSON.stringify(delta) })).not.toThrow();
    expect(() => validateFrame(media, { id: "c2", event: "assistant.delta", data: JSON.stringify({ ...delta, cursor: "c2" }) })).toThrow(ContractViolation);
  });
});
