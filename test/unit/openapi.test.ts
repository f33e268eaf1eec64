/**
 * The published contract (docs/api.md "The contract"): an OpenAPI 3.1 document with `info.version`
 * `current`, generated from the zod schemas and the route table, committed as `openapi.json`.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { Validator } from "@seriousme/openapi-schema-validator";
import { describe, expect, it } from "vitest";
import { buildOpenApi, openApiText } from "../../src/shared/openapi.ts";
import { ROUTES } from "../../src/shared/route-table.ts";
import { ROOT } from "../helpers/stack.ts";
import { matchesComponent } from "../helpers/contract.ts";
import { ReplySchema } from "../../src/shared/executor-protocol.ts";
import { checkCredentialValue } from "../../src/session/credentials.ts";

const committed = readFileSync(path.join(ROOT, "openapi.json"), "utf8");
const doc = buildOpenApi() as any;

describe("the OpenAPI contract", () => {
  it("is committed as openapi.json exactly as generated (run `npm run openapi` after a contract change)", () => {
    expect(committed).toBe(openApiText());
  });

  it("is a valid OpenAPI 3.1 document; a broken one is refused by the same validator", async () => {
    const v = new Validator();
    expect(await v.validate(JSON.parse(committed))).toEqual({ valid: true });
    expect(v.version).toBe("3.1");
    const broken = structuredClone(doc);
    delete broken.info.version;
    broken.paths["/sessions"].post.responses["201"].headers = "X-Request-ID";
    expect((await new Validator().validate(broken)).valid).toBe(false);
  });

  it("has info.version current and no version in any path", () => {
    expect(doc.openapi).toMatch(/^3\.1\./);
    expect(doc.info.version).toBe("current");
    for (const p of Object.keys(doc.paths)) expect(p).not.toMatch(/\/v[0-9]+(\/|$)|version/i);
  });

  it("lists every endpoint of docs/api.md with its success status", () => {
    const ops = Object.entries(doc.paths).flatMap(([p, item]: [string, any]) =>
      Object.entries(item).map(([m, op]: [string, any]) => `${m.toUpperCase()} ${p} ${Object.keys(op.responses).filter((s) => Number(s) < 300).join("/")}`),
    );
    expect(ops.sort()).toEqual(
      [
        "POST /sessions 201",
        "GET /sessions 200",
        "GET /sessions/{id} 200",
        "POST /sessions/{id}/events 202",
        "GET /sessions/{id}/events 200",
        "POST /sessions/{id}/resume 200",
        "POST /sessions/{id}/close 202",
        "POST /sessions/{id}/flush 200",
        "GET /sessions/{id}/sync 200",
        "POST /sessions/{id}/restore 200",
        "GET /catalog 200",
        "POST /executors 201",
        "POST /executors/{id}/close 200",
        "GET /executors/{id}/commands 200",
        "POST /executors/{id}/responses 200",
        "GET /executors/{id}/rpc 101",
        "GET /health/live 200",
        "GET /health/ready 200",
        "GET /openapi.json 200",
      ].sort(),
    );
  });

  it("gives every response X-Request-ID and nosniff, every error the ErrorResponse body, 401 WWW-Authenticate and 429 Retry-After", () => {
    for (const item of Object.values(doc.paths) as any[]) {
      for (const op of Object.values(item) as any[]) {
        for (const [status, r] of Object.entries(op.responses) as [string, any][]) {
          expect(Object.keys(r.headers)).toEqual(expect.arrayContaining(["X-Request-ID", "X-Content-Type-Options"]));
          if (Number(status) >= 400 && status !== "503") {
            expect(r.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/ErrorResponse" });
          }
          if (status === "401") expect(r.headers["WWW-Authenticate"]).toBeDefined();
          if (status === "429") expect(r.headers["Retry-After"]).toBeDefined();
        }
        if (op.security.length > 0) expect(op.responses["401"]).toBeDefined();
      }
    }
    expect(doc.components.schemas.ErrorResponse.required.sort()).toEqual(["error", "request_id"]);
  });

  it("serves both media types of GET /events, Last-Event-ID, and the SSE frame shapes", () => {
    const op = doc.paths["/sessions/{id}/events"].get;
    expect(Object.keys(op.responses["200"].content).sort()).toEqual(["application/json", "text/event-stream"]);
    expect(op.responses["200"].content["text/event-stream"]["x-sse-frame"]).toEqual({ $ref: "#/components/schemas/SseEventFrame" });
    expect(op.parameters.map((p: any) => `${p.in}:${p.name}`)).toEqual(expect.arrayContaining(["header:Last-Event-ID", "query:after", "query:limit"]));
    // Retained frames require `id`; the two live-only ones have none.
    const frames = doc.components.schemas.SseEventFrame.anyOf as any[];
    const byType = Object.fromEntries(frames.map((f) => [f.properties.event.const, f]));
    expect(Object.keys(byType).sort()).toEqual(
      ["assistant.delta", "assistant.message", "session.error", "session.status", "tool.call", "tool.progress", "tool.result", "user.message"],
    );
    for (const t of ["assistant.delta", "tool.progress"]) expect(byType[t].properties.id).toBeUndefined();
    for (const t of ["user.message", "tool.call", "session.status"]) expect(byType[t].required).toContain("id");
    expect(doc.paths["/executors/{id}/commands"].get.responses["200"].content["text/event-stream"]["x-sse-frame"]).toEqual({
      $ref: "#/components/schemas/SseCommandFrame",
    });
    // A JSON page holds retained events only: exactly the frame types that carry an `id`.
    const retained = Object.keys(byType).filter((t) => byType[t].properties.id !== undefined).sort();
    const page = doc.components.schemas.EventList.properties.events.items;
    expect(page).toEqual({ $ref: "#/components/schemas/RetainedEvent" });
    const listed = (doc.components.schemas.RetainedEvent.oneOf ?? doc.components.schemas.RetainedEvent.anyOf) as any[];
    expect(listed.map((v) => doc.components.schemas[v.$ref.split("/").pop()].properties.type.const).sort()).toEqual(retained);
  });

  it("describes objects without additional properties, as docs/api.md requires", () => {
    for (const id of ["Session", "SessionConfig", "CreateSession", "Input", "Event", "SyncStatus", "ExecutorRegistration", "Reply", "ErrorResponse"]) {
      const s = doc.components.schemas[id];
      // A union lists its objects; an object may carry a `oneOf` of its own (Reply: which members it holds).
      const objects = s.type === "object" ? [s] : (s.anyOf ?? s.oneOf);
      for (const o of objects) if (!o.$ref) expect(o.additionalProperties, id).toBe(false);
    }
  });

  it("refuses the bodies the service refuses beyond their shape: an image's data and mime_type, unknown_outcome without is_error, a reply with both or neither of progress and result", () => {
    const C = "c".repeat(32);
    const reply = (r: object) => ({ connection: C, call_id: C, ...r });
    const image = (data: string, mime_type: string) => ({ result: { content: [{ type: "image", data, mime_type }] } });
    const cases = [
      reply({ progress: 1 }),
      reply({ result: { content: [] } }),
      reply(image("AAAA", "image/png")),
      reply({ result: { content: [], is_error: true, unknown_outcome: true } }),
      reply({}),
      reply({ progress: 1, result: { content: [] } }),
      reply({ result: { content: [], unknown_outcome: true } }),
      reply({ result: { content: [], is_error: false, unknown_outcome: true } }),
      reply(image("", "image/png")),
      reply(image("AAA", "image/png")),
      reply(image("@@@@", "image/png")),
      reply(image("AAAA", "png")),
    ];
    for (const body of cases) expect(matchesComponent("Reply", body), JSON.stringify(body)).toBe(ReplySchema.safeParse(body).success);
    expect(cases.filter((b) => ReplySchema.safeParse(b).success)).toHaveLength(4);
  });

  it("states a credential value's two forms, a binding's parameters object and delivery's values as the service checks them", () => {
    const accepts = (v: unknown) => {
      try {
        checkCredentialValue("a", v, false);
        return true;
      } catch {
        return false;
      }
    };
    const values = ["tok", "Bearer a b", { headers: { "X-Key": "v" } }, "", " x", "é", "a\nb", 1, null, [], {}, { headers: {} }, { headers: { "bad name": "v" } }, { headers: { K: 1 } }, { headers: { K: "v" }, x: 1 }];
    for (const value of values) expect(matchesComponent("CredentialInput", { binding: "a", value }), JSON.stringify(value)).toBe(accepts(value));
    expect(values.filter(accepts)).toHaveLength(3);
    for (const parameters of [[], "x", 1, null]) expect(matchesComponent("ToolBinding", { alias: "a", parameters })).toBe(false);
    expect(matchesComponent("ToolBinding", { alias: "a", parameters: { k: 1 } })).toBe(true);
    for (const delivery of ["queue", "steer"]) expect(matchesComponent("Input", { type: "user.message", text: "t", delivery })).toBe(true);
    expect(matchesComponent("Input", { type: "user.message", text: "t", delivery: "later" })).toBe(false);
  });

  it("has one operation per route of the table, each with a unique operationId", () => {
    const ids = ROUTES.map((r) => r.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(Object.values(doc.paths).flatMap((i: any) => Object.keys(i))).toHaveLength(ROUTES.length);
  });
});
