/**
 * Compiles a tool's JSON Schema the way the call-time validator (@cfworker/json-schema) will, when
 * the host configuration loads, and reports what would otherwise fail on every call or silently
 * accept anything: a `$ref` that resolves to nothing in the document, and a keyword whose value
 * has the wrong shape (`{"properties": 5}` is ignored by a validator, so it would check nothing).
 * The keyword tables are cfworker's own, so the check and the validator agree on what a subschema
 * is. Pure: runs in the Worker and in Node (`svc -check`).
 */
import { dereference, schemaArrayKeyword, schemaKeyword, schemaMapKeyword } from "@cfworker/json-schema";

export type SchemaProblem = { path: PropertyKey[]; message: string };

const TYPES = new Set(["null", "boolean", "object", "array", "number", "string", "integer"]);
const NUMBER_KEYWORDS = ["minimum", "maximum", "multipleOf"];
/** Draft 4 writes these as booleans beside `minimum` / `maximum`; later drafts as numbers. */
const EXCLUSIVE_KEYWORDS = ["exclusiveMinimum", "exclusiveMaximum"];
const COUNT_KEYWORDS = ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"];

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isSchema = (v: unknown): boolean => typeof v === "boolean" || isObject(v);

function badPattern(p: unknown): string | undefined {
  if (typeof p !== "string") return "must be a string";
  try {
    new RegExp(p, "u");
    return undefined;
  } catch {
    return "is not a valid regular expression";
  }
}

/** Problems of one schema object's own keywords; `visit` is called for each subschema. */
function keywordProblems(node: Record<string, unknown>, path: PropertyKey[], visit: (v: unknown, p: PropertyKey[]) => void): SchemaProblem[] {
  const out: SchemaProblem[] = [];
  const bad = (key: PropertyKey[], message: string) => out.push({ path: [...path, ...key], message });
  for (const [key, value] of Object.entries(node)) {
    if (key in schemaArrayKeyword && Array.isArray(value)) {
      value.forEach((v, i) => (isSchema(v) ? visit(v, [...path, key, i]) : bad([key, i], "must be a schema (an object or a boolean)")));
    } else if (key in schemaKeyword) {
      if (isSchema(value)) visit(value, [...path, key]);
      else bad([key], key in schemaArrayKeyword ? "must be a schema or an array of schemas" : "must be a schema (an object or a boolean)");
    } else if (key in schemaArrayKeyword) {
      bad([key], "must be an array of schemas");
    } else if (key in schemaMapKeyword) {
      if (!isObject(value)) bad([key], "must be an object whose values are schemas");
      else {
        for (const [name, v] of Object.entries(value)) {
          if (!isSchema(v)) bad([key, name], "must be a schema (an object or a boolean)");
          else visit(v, [...path, key, name]);
          if (key === "patternProperties" && badPattern(name)) bad([key, name], "is not a valid regular expression");
        }
      }
    } else if (key === "type") {
      const types = Array.isArray(value) ? value : [value];
      if (types.length === 0 || !types.every((t) => typeof t === "string" && TYPES.has(t))) bad([key], `must name JSON types (${[...TYPES].join(", ")})`);
    } else if (key === "required") {
      if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) bad([key], "must be an array of strings");
    } else if (key === "enum") {
      if (!Array.isArray(value)) bad([key], "must be an array");
    } else if (key === "pattern") {
      const problem = badPattern(value);
      if (problem) bad([key], problem);
    } else if (NUMBER_KEYWORDS.includes(key)) {
      if (typeof value !== "number") bad([key], "must be a number");
    } else if (EXCLUSIVE_KEYWORDS.includes(key)) {
      if (typeof value !== "number" && typeof value !== "boolean") bad([key], "must be a number");
    } else if (COUNT_KEYWORDS.includes(key)) {
      if (!Number.isInteger(value) || (value as number) < 0) bad([key], "must be a non-negative integer");
    }
  }
  return out;
}

/**
 * Everything wrong with `schema` as a validator would use it, each with its path inside the
 * schema. External references are reported elsewhere (the configuration refuses them) and are
 * not resolved here.
 */
export function schemaProblems(schema: Record<string, unknown>): SchemaProblem[] {
  // A copy: dereferencing annotates every subschema, and the configuration object stays as written.
  const copy = structuredClone(schema);
  let lookup: Record<string, unknown>;
  try {
    lookup = dereference(copy as never) as Record<string, unknown>;
  } catch (err) {
    return [{ path: [], message: `cannot be compiled: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}` }];
  }
  const problems: SchemaProblem[] = [];
  // Iterative: a large configuration file can nest deeper than the call stack allows.
  const stack: { value: unknown; path: PropertyKey[] }[] = [{ value: copy, path: [] }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (!isObject(value)) continue;
    problems.push(...keywordProblems(value, path, (v, p) => stack.push({ value: v, path: p })));
    for (const [keyword, absolute] of [
      ["$ref", "__absolute_ref__"],
      ["$recursiveRef", "__absolute_recursive_ref__"],
    ] as const) {
      const ref = value[keyword];
      const target = (value as Record<string, unknown>)[absolute];
      if (typeof ref === "string" && ref.startsWith("#") && typeof target === "string" && lookup[target] === undefined) {
        problems.push({ path: [...path, keyword], message: `${JSON.stringify(ref)} resolves to nothing in this schema` });
      }
    }
  }
  return problems.sort((a, b) => String(a.path).localeCompare(String(b.path)));
}
