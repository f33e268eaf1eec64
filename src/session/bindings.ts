/**
 * Tool bindings of a session (`ToolBinding`, docs/api.md "Bindings"), as resolved at create and
 * stored with the session. A binding groups tools under an alias:
 * - `provider` names a host tool whose calls this binding routes (a credential override for the
 *   alias replaces that tool's `token_env` bearer for this session);
 * - `runtime` lists the descriptors its executor (`executor`) serves;
 * - `operations` narrows the group to those names;
 * - `parameters` (an object) is merged into every call's arguments and hidden from the model: its
 *   keys leave the descriptor's `properties` and `required`.
 * Pure functions: used by creation (Worker), the SessionObject and its unit tests.
 */
import type { Tool } from "../shared/api-schema.ts";

export type StoredBinding = {
  alias: string;
  /** Names of the tools this binding enables in the session (after `operations`). */
  tools: string[];
  /** Set for runtime bindings: the executor currently serving them. */
  executor?: string;
  /** Full descriptors the executor serves (before parameters are hidden): rebinding compares them. */
  runtime?: Tool[];
  parameters?: Record<string, unknown>;
};

/** The binding that enables tool `name`, if any (names are unique within a session). */
export function bindingOf(bindings: StoredBinding[], name: string): StoredBinding | undefined {
  return bindings.find((b) => b.tools.includes(name));
}

/** The descriptor the model sees: the parameters' keys are hidden from its input schema. */
export function hideParameters(tool: Tool, parameters: Record<string, unknown> | undefined): Tool {
  if (!parameters || Object.keys(parameters).length === 0) return tool;
  const schema = { ...tool.input_schema };
  const hidden = new Set(Object.keys(parameters));
  if (isObject(schema.properties)) {
    schema.properties = Object.fromEntries(Object.entries(schema.properties).filter(([k]) => !hidden.has(k)));
  }
  if (Array.isArray(schema.required)) schema.required = schema.required.filter((k) => !(typeof k === "string" && hidden.has(k)));
  return { ...tool, input_schema: schema };
}

/** The arguments a tool receives: the model's, with the binding's parameters on top. */
export function mergeParameters(args: unknown, parameters: Record<string, unknown> | undefined): Record<string, unknown> {
  const base = isObject(args) ? args : {};
  return parameters ? { ...base, ...parameters } : base;
}

/** Deep equality of JSON values regardless of key order (descriptors sent by two clients). */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (isObject(v)) {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
