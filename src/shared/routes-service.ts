/** Contract of the service-wide routes: the tool catalog, health and the contract itself. */
import * as z from "zod";
import { HealthSchema, ToolCatalogSchema } from "./api-schema.ts";
import { component } from "./contract-registry.ts";
import type { RouteContract } from "./route-contract.ts";

export const OpenApiDocumentSchema = component(
  "OpenApiDocument",
  z.record(z.string(), z.unknown()),
  "This OpenAPI 3.1 document.",
);

export const SERVICE_ROUTES: RouteContract[] = [
  {
    method: "get",
    path: "/catalog",
    operationId: "getCatalog",
    summary: "List the tools the caller's tenant may enable",
    tag: "tools",
    access: "token",
    responses: { 200: { description: "Tool descriptors; no urls, no credentials.", json: ToolCatalogSchema } },
    errors: [401, 403, 500],
  },
  {
    method: "get",
    path: "/health/live",
    operationId: "live",
    summary: "Liveness",
    tag: "health",
    access: "public",
    responses: { 200: { description: "`{\"status\":\"ok\"}` while the server runs.", json: HealthSchema } },
    errors: [500],
  },
  {
    method: "get",
    path: "/health/ready",
    operationId: "ready",
    summary: "Readiness",
    description: "`ready` when new work can be accepted; `not_ready` while shutting down, with no runner-host to run turns, or, with `persistence`, while the upload backlog is full or its startup scan runs.",
    tag: "health",
    access: "public",
    responses: {
      200: { description: "`{\"status\":\"ready\"}`.", json: HealthSchema },
      503: { description: "`{\"status\":\"not_ready\"}`.", json: HealthSchema },
    },
    errors: [500],
  },
  {
    method: "get",
    path: "/openapi.json",
    operationId: "getOpenApi",
    summary: "This contract",
    tag: "health",
    access: "public",
    responses: { 200: { description: "The OpenAPI 3.1 document.", json: OpenApiDocumentSchema } },
    errors: [500],
  },
];
