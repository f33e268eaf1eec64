/**
 * Response validation against the committed OpenAPI document (openapi.json): every response the
 * end-to-end helpers see must be one the contract lists for its operation, with the headers it
 * names and a body matching its schema; every SSE frame must match the operation's `x-sse-frame`.
 * Schemas are checked with @cfworker/json-schema (draft 2020-12, OpenAPI 3.1's dialect).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { Validator, type OutputUnit } from "@cfworker/json-schema";
import { ROOT } from "./stack.ts";

type Json = Record<string, any>;

const BASE = "https://contract.invalid/openapi.json";
export const contract: Json = JSON.parse(readFileSync(path.join(ROOT, "openapi.json"), "utf8"));

const paths = Object.keys(contract.paths).map((template) => ({
  template,
  re: new RegExp(`^${template.replace(/\{[a-z_]+\}/g, "[a-fA-F0-9]{32}").replace(/\./g, "\\.")}/?$`),
}));

const validators = new Map<string, Validator>();

/** Validates `value` against a `$ref` into the document (or an inline schema). */
function check(schema: Json, value: unknown): OutputUnit[] {
  const key = JSON.stringify(schema);
  let v = validators.get(key);
  if (!v) {
    const root = schema.$ref ? { $ref: `${BASE}${schema.$ref}` } : schema;
    v = new Validator(root as any, "2020-12", false);
    v.addSchema({ ...contract, $id: BASE } as any, BASE);
    validators.set(key, v);
  }
  return v.validate(value).errors;
}

/** Whether `value` matches the document's component `name` (`#/components/schemas/<name>`). */
export function matchesComponent(name: string, value: unknown): boolean {
  if (!contract.components.schemas[name]) throw new Error(`openapi.json has no component ${name}`);
  return check({ $ref: `#/components/schemas/${name}` }, value).length === 0;
}

function deref(o: Json): Json {
  if (!o.$ref) return o;
  const target = (o.$ref as string).slice(2).split("/").reduce((at: Json, k) => at[k], contract);
  return deref(target);
}

export class ContractViolation extends Error {}

/**
 * Violations seen where throwing would not reach the test (frames read in the background). The e2e
 * setup fails the test that was running when they arrived.
 */
export const violations: string[] = [];

export function recordViolation(fn: () => void): void {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof ContractViolation)) throw e;
    violations.push(e.message);
  }
}

function fail(where: string, what: string): never {
  throw new ContractViolation(`${where}: ${what}`);
}

function summary(errors: OutputUnit[]): string {
  // The deepest errors say what is wrong; the ones above only repeat "a subschema had errors".
  return errors
    .filter((e) => !/subschema|did not match|does not match/i.test(e.error))
    .slice(0, 6)
    .map((e) => `${e.instanceLocation} ${e.error}`)
    .join("; ") || errors.slice(0, 3).map((e) => `${e.instanceLocation} ${e.error}`).join("; ");
}

/** The operation a request reached, or undefined for a path or method the contract does not have. */
export function operationOf(method: string, url: string): { template: string; op: Json } | undefined {
  const pathname = new URL(url, "http://x").pathname;
  const hit = paths.find((p) => p.re.test(pathname));
  const op = hit && contract.paths[hit.template][method.toLowerCase()];
  return op ? { template: hit.template, op } : undefined;
}

export type Seen = { method: string; url: string; status: number; headers: Headers; text: string };

/**
 * Checks one complete response. A request outside the contract must get the `404 not_found` error
 * (unknown route); anything else must be listed under its operation.
 */
export function validateResponse(r: Seen): void {
  const found = operationOf(r.method, r.url);
  const where = `${r.method} ${new URL(r.url, "http://x").pathname} → ${r.status}`;
  if (!found) {
    // The runner-hosts' dial-in and the operator's status check (`/internal/*`, runner secret) are
    // not part of the public contract; their refusals still use the error shape.
    const internal = new URL(r.url, "http://x").pathname.startsWith("/internal/");
    if (internal && r.status < 400) return;
    if (r.status !== 404 && !internal) fail(where, "a route outside the contract must answer 404");
    return validateBody(where, { headers: {}, content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorResponse" } } } }, r);
  }
  const spec = found.op.responses[String(r.status)];
  if (!spec) fail(where, `status not in the contract of ${found.op.operationId} (has ${Object.keys(found.op.responses).join(", ")})`);
  validateHeaders(where, spec, r.headers);
  validateBody(where, spec, r);
}

export function validateHeaders(where: string, spec: Json, headers: Headers): void {
  for (const [name, h] of Object.entries(spec.headers ?? {}) as [string, Json][]) {
    const header = deref(h);
    const value = headers.get(name);
    if (value === null) {
      if (header.required) fail(where, `header ${name} is missing`);
      continue;
    }
    const errors = check(header.schema, value);
    if (errors.length > 0) fail(where, `header ${name}: ${JSON.stringify(value)} ${summary(errors)}`);
  }
}

function validateBody(where: string, spec: Json, r: Seen): void {
  const content = spec.content as Json | undefined;
  if (!content) {
    if (r.text !== "") fail(where, "the contract has no body for this answer");
    return;
  }
  const type = (r.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  const media = content[type];
  if (!media) fail(where, `content type ${JSON.stringify(type)} not in the contract (${Object.keys(content).join(", ")})`);
  if (type !== "application/json") return; // streams are checked frame by frame (validateFrame)
  let body: unknown;
  try {
    body = JSON.parse(r.text);
  } catch {
    fail(where, "the body is not JSON");
  }
  const errors = check(media.schema, body);
  if (errors.length > 0) fail(where, `body does not match ${media.schema.$ref ?? "its schema"}: ${summary(errors)}; body ${r.text.slice(0, 300)}`);
  const err = body as Json;
  // Error bodies carry the request id; a documented non-error body (503 `not_ready`) has none.
  if (r.status >= 400 && "error" in err && err.request_id !== r.headers.get("x-request-id")) fail(where, "request_id differs from X-Request-ID");
}

/** Checks the head of a streamed response (status, headers, media type) before its frames arrive. */
export function validateStreamHead(method: string, url: string, status: number, headers: Headers): Json {
  const found = operationOf(method, url);
  const where = `${method} ${new URL(url, "http://x").pathname} → ${status} (stream)`;
  if (!found) fail(where, "not in the contract");
  const spec = found.op.responses[String(status)];
  if (!spec) fail(where, `status not in the contract of ${found.op.operationId}`);
  validateHeaders(where, spec, headers);
  const media = spec.content?.["text/event-stream"];
  if (!media) fail(where, "the contract has no text/event-stream answer here");
  return media;
}

/** Checks one SSE frame of a stream whose head passed `validateStreamHead`. */
export function validateFrame(media: Json, frame: { id?: string; event?: string; data: string }): void {
  const shaped: Json = { event: frame.event, data: JSON.parse(frame.data) };
  if (frame.id !== undefined) shaped.id = frame.id;
  const errors = check(media["x-sse-frame"], shaped);
  if (errors.length > 0) fail(`SSE frame ${frame.event}`, `${summary(errors)}; frame ${JSON.stringify(shaped).slice(0, 300)}`);
}
