/**
 * Host tool bindings: the `tools` entries of the host configuration (docs/configuration.md
 * "Tools"). After parsing, `transport` is always resolved and `mcp_tool` names the remote
 * tool whenever the transport is `mcp`, so callers never re-derive either.
 */
import * as z from "zod";
import { httpUrl, int, optionalEnvName, tenant } from "./config-fields.ts";
import { schemaProblems } from "./json-schema-check.ts";
import { MAX_JSON_DEPTH } from "./json-text.ts";
import { nestsDeeper } from "./json-values.ts";
import { formatPath } from "./zod-issues.ts";

export const TOOL_NAME_PATTERN = /^[a-zA-Z][a-zA-Z0-9_]{0,63}$/;

/** Tool `timeout_seconds`: default 300, range 1 to 86400 (one day). */
export const TOOL_TIMEOUT_SECONDS = { min: 1, max: 86_400, default: 300 } as const;
/** Tool `max_output_bytes`: default 1 MiB, range 1 to 2 MiB. */
export const TOOL_MAX_OUTPUT_BYTES = { min: 1, max: 2_097_152, default: 1_048_576 } as const;

export type JsonObject = Record<string, unknown>;

/** Keywords whose value is a URI reference that a validator would resolve. */
const REF_KEYWORDS = ["$ref", "$dynamicRef", "$recursiveRef"];

/**
 * Every reference in a schema that leaves the document (anything not starting with `#`), with its
 * path inside the schema. Iterative: a 4 MiB file can nest deeper than the call stack allows.
 */
export function externalRefs(schema: unknown): { path: PropertyKey[]; ref: unknown }[] {
  const found: { path: PropertyKey[]; ref: unknown }[] = [];
  const stack: { value: unknown; path: PropertyKey[] }[] = [{ value: schema, path: [] }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push({ value: v, path: [...path, i] }));
    } else if (typeof value === "object" && value !== null) {
      for (const [k, v] of Object.entries(value)) {
        const isRef = REF_KEYWORDS.includes(k) && typeof v === "string" && !v.startsWith("#");
        if (isRef) found.push({ path: [...path, k], ref: v });
        else stack.push({ value: v, path: [...path, k] });
      }
    }
  }
  return found.reverse();
}

/**
 * A tool's JSON Schema, checked the way the call-time validator will read it: host `tools` entries
 * and executors' runtime tools alike, so neither kind is accepted only to fail (or check nothing)
 * on every call.
 */
export function jsonSchema(requireObjectType: boolean) {
  return z.record(z.string(), z.unknown()).superRefine((schema, ctx) => {
    // The bound of a request body: a schema deeper than any body could be is no tool's.
    if (nestsDeeper(schema, MAX_JSON_DEPTH)) {
      ctx.addIssue({ code: "custom", message: `nests deeper than ${MAX_JSON_DEPTH} levels` });
      return;
    }
    if (requireObjectType && schema.type !== "object") {
      ctx.addIssue({ code: "custom", message: 'must be a JSON Schema with "type": "object" (tool arguments are an object)' });
    }
    for (const { path, ref } of externalRefs(schema)) {
      ctx.addIssue({
        code: "custom",
        path,
        message: `external reference ${JSON.stringify(ref)} is not allowed; only references starting with # are`,
      });
    }
    // Compiled now, so a schema that would throw on every call (or check nothing) fails -check.
    for (const { path, message } of schemaProblems(schema)) ctx.addIssue({ code: "custom", path, message });
  });
}

/** One host `tools` entry (docs/configuration.md "Tools"). */
export const HostToolSchema = z
  .strictObject({
    name: z.string().regex(TOOL_NAME_PATTERN, {
      error: "must start with a letter and contain only letters, digits and _ (at most 64 characters)",
    }),
    description: z.string().refine((s) => s.trim().length > 0, { error: "must not be empty" }),
    input_schema: jsonSchema(true),
    output_schema: jsonSchema(false).nullable().default(null),
    url: httpUrl({ credentials: false, fragment: false, query: true }),
    tenants: z.array(tenant).min(1, { error: "must list at least one tenant" }),
    token_env: optionalEnvName,
    transport: z.enum(["http", "mcp"], { error: 'must be "http" or "mcp"' }).optional(),
    mcp_tool: z.string().default(""),
    timeout_seconds: int(TOOL_TIMEOUT_SECONDS.min, TOOL_TIMEOUT_SECONDS.default, TOOL_TIMEOUT_SECONDS.max),
    max_output_bytes: int(TOOL_MAX_OUTPUT_BYTES.min, TOOL_MAX_OUTPUT_BYTES.default, TOOL_MAX_OUTPUT_BYTES.max),
    inspect_session: z.boolean().default(false),
  })
  .superRefine((t, ctx) => {
    if (t.transport === "http" && t.mcp_tool !== "") {
      ctx.addIssue({ code: "custom", path: ["transport"], message: '"http" cannot be combined with mcp_tool' });
    }
    if (t.inspect_session && (t.mcp_tool !== "" || t.transport === "mcp")) {
      ctx.addIssue({
        code: "custom",
        path: ["inspect_session"],
        message: "cannot be combined with mcp_tool or the mcp transport (MCP calls carry no inspection scope)",
      });
    }
  })
  .transform((t) => {
    const transport: "http" | "mcp" = t.transport ?? (t.mcp_tool !== "" ? "mcp" : "http");
    // A bare `transport: "mcp"` calls the remote tool of the same name.
    const mcp_tool = transport === "mcp" && t.mcp_tool === "" ? t.name : t.mcp_tool;
    return { ...t, transport, mcp_tool };
  });

/** A host tool after parsing: `transport` resolved, unset `token_env` / `mcp_tool` are "", unset `output_schema` is null. */
export type HostTool = z.output<typeof HostToolSchema>;

export const ToolsSchema = z
  .array(HostToolSchema)
  .superRefine((tools, ctx) => {
    const first = new Map<string, number>();
    tools.forEach((t, i) => {
      const seen = first.get(t.name);
      if (seen === undefined) first.set(t.name, i);
      else ctx.addIssue({ code: "custom", path: [i, "name"], message: `"${t.name}" is already used by ${formatPath(["tools", seen])}` });
    });
  })
  .default([]);
