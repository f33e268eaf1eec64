/**
 * The OpenAPI 3.1 document, built from the route table and the registered zod schemas (zod's own
 * JSON Schema output, draft 2020-12, which is OpenAPI 3.1's schema dialect). Nothing here restates
 * a schema: components come from the registry, operations from the route table. The result is
 * deterministic, so the committed `openapi.json` can be compared with it.
 */
import * as z from "zod";
import { ErrorResponseSchema } from "./api-schema.ts";
import { componentsById, contractRegistry } from "./contract-registry.ts";
import { ERROR_MEANING, type Param, type ResponseSpec, type RouteContract } from "./route-contract.ts";
import { ROUTES } from "./route-table.ts";

type Json = Record<string, unknown>;

const SCHEMA_REF = (id: string) => `#/components/schemas/${id}`;

function ref(schema: z.ZodType): Json {
  const meta = contractRegistry.get(schema);
  if (!meta) throw new Error("a schema used by the route table is not registered as a component");
  return { $ref: SCHEMA_REF(meta.id) };
}

/** A one-off schema (query and header parameters): zod's JSON Schema without the dialect line. */
function inline(schema: z.ZodType): Json {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { target: "draft-2020-12" }) as Json;
  return rest;
}

function components(): Json {
  const { schemas } = z.toJSONSchema(contractRegistry, { target: "draft-2020-12", uri: SCHEMA_REF });
  const out: Json = {};
  for (const [id, s] of Object.entries(schemas).sort(([a], [b]) => a.localeCompare(b))) {
    const { $schema: _s, $id: _i, ...rest } = s as Json;
    out[id] = { ...rest, description: componentsById.get(id)!.description };
  }
  return out;
}

const STANDARD_HEADERS = {
  "X-Request-ID": { $ref: "#/components/headers/X-Request-ID" },
  "X-Content-Type-Options": { $ref: "#/components/headers/X-Content-Type-Options" },
};

function response(spec: ResponseSpec): Json {
  const headers: Json = { ...STANDARD_HEADERS };
  for (const h of spec.headers ?? []) headers[h] = { $ref: `#/components/headers/${h}` };
  const content: Json = {};
  if (spec.json) {
    const list = Array.isArray(spec.json) ? spec.json : [spec.json];
    content["application/json"] = { schema: list.length === 1 ? ref(list[0]!) : { oneOf: list.map(ref) } };
  }
  if (spec.sse) {
    // OpenAPI 3.1 has no schema for the items of a stream: the body is text, and the shape of
    // each frame is given by `x-sse-frame` (a component) for validators and generators.
    content["text/event-stream"] = { schema: { type: "string" }, "x-sse-frame": ref(spec.sse) };
  }
  const out: Json = { description: spec.description, headers };
  if (Object.keys(content).length > 0) out.content = content;
  return out;
}

function param(name: string, where: "query" | "header" | "path", p: Param): Json {
  return { name, in: where, required: where === "path" || p.required === true, description: p.description, schema: inline(p.schema) };
}

const SECURITY: Record<RouteContract["access"], Json[]> = {
  public: [],
  token: [{ bearerToken: [] }],
  write: [{ bearerToken: [] }],
  manage: [{ bearerToken: [] }],
  executor: [{ executorToken: [] }],
};

const ACCESS_NOTE: Record<RouteContract["access"], string> = {
  public: "No authentication.",
  token: "Any valid token.",
  write: "A token that is not read-only.",
  manage: "A token with `manage`.",
  executor: "The executor credential returned at registration.",
};

function operation(r: RouteContract): Json {
  const parameters: Json[] = [];
  for (const name of r.path.matchAll(/\{([a-z_]+)\}/g)) parameters.push({ $ref: `#/components/parameters/${name[1]}` });
  for (const [name, p] of Object.entries(r.query ?? {})) parameters.push(param(name, "query", p));
  for (const [name, p] of Object.entries(r.headers ?? {})) parameters.push(param(name, "header", p));
  const responses: Json = {};
  for (const [status, spec] of Object.entries(r.responses)) responses[status] = response(spec);
  for (const status of [...new Set(r.errors)].sort()) {
    const meaning = ERROR_MEANING[status];
    if (!meaning) throw new Error(`${r.operationId}: no meaning for error status ${status}`);
    responses[String(status)] = response({ description: meaning.description, json: ErrorResponseSchema, headers: meaning.headers });
  }
  const op: Json = {
    operationId: r.operationId,
    summary: r.summary,
    description: [r.description, ACCESS_NOTE[r.access]].filter(Boolean).join(" "),
    tags: [r.tag],
    security: SECURITY[r.access],
  };
  if (parameters.length > 0) op.parameters = parameters;
  if (r.body) {
    op.requestBody = { required: !r.body.optional, content: { "application/json": { schema: ref(r.body.schema) } } };
  }
  op.responses = responses;
  return op;
}

export function buildOpenApi(routes: readonly RouteContract[] = ROUTES): Json {
  const paths: Record<string, Json> = {};
  for (const r of routes) (paths[r.path] ??= {})[r.method] = operation(r);
  return {
    openapi: "3.1.1",
    info: {
      title: "Agent Session Service",
      version: "current",
      description:
        "Multi-tenant agent sessions over HTTP JSON and server-sent events. Paths carry no version; a deployment pins a version by running a specific build. Every response carries `X-Request-ID` and `X-Content-Type-Options: nosniff`.",
    },
    tags: [...new Set(routes.map((r) => r.tag))].map((name) => ({ name })),
    paths,
    components: {
      schemas: components(),
      parameters: {
        id: { name: "id", in: "path", required: true, description: "A 32-hex id.", schema: { type: "string", pattern: "^[a-fA-F0-9]{32}$" } },
      },
      headers: {
        "X-Request-ID": { description: "32 lowercase hex, on every response; equals `request_id` of an error.", required: true, schema: { type: "string", pattern: "^[0-9a-f]{32}$" } },
        "X-Content-Type-Options": { description: "Always `nosniff`.", required: true, schema: { type: "string", const: "nosniff" } },
        "Retry-After": { description: "Seconds to wait before retrying: `1`.", required: true, schema: { type: "string", const: "1" } },
        "WWW-Authenticate": { description: "`Bearer`.", required: true, schema: { type: "string", const: "Bearer" } },
      },
      securitySchemes: {
        bearerToken: { type: "http", scheme: "bearer", description: "A token from the host configuration (`Authorization: Bearer <token>`)." },
        executorToken: { type: "http", scheme: "bearer", description: "An executor credential from `POST /executors`." },
      },
    },
  };
}

/** The document as committed in `openapi.json` and served at `GET /openapi.json`. */
export function openApiText(): string {
  return `${JSON.stringify(buildOpenApi(), null, 2)}\n`;
}
