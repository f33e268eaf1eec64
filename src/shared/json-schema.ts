/**
 * JSON Schema checks for tool arguments and structured output, with @cfworker/json-schema: it
 * interprets schemas instead of generating code, so the same module runs in Node and in workerd
 * (where `new Function` is refused). Validators are compiled once per schema object; the host
 * configuration is parsed once, so its schema objects live as long as the process.
 */
import { Validator, type OutputUnit, type Schema, type SchemaDraft } from "@cfworker/json-schema";

const validators = new WeakMap<object, Validator>();

/** The draft named by `$schema`; 2020-12 when absent or unknown (the current draft). */
function draftOf(schema: Schema): SchemaDraft {
  const uri = typeof schema.$schema === "string" ? schema.$schema : "";
  if (uri.includes("draft-04")) return "4";
  // cfworker has no draft-06 mode; draft 7 only adds keywords to it.
  if (uri.includes("draft-06") || uri.includes("draft-07")) return "7";
  if (uri.includes("2019-09")) return "2019-09";
  return "2020-12";
}

function validatorFor(schema: object | boolean): Validator {
  if (typeof schema === "boolean") return new Validator(schema, "2020-12");
  let v = validators.get(schema);
  if (!v) {
    // shortCircuit: stop at the first failure; one readable reason is all a caller reports.
    v = new Validator(schema as Schema, draftOf(schema as Schema), true);
    validators.set(schema, v);
  }
  return v;
}

/** `#/a/0` → `/a/0`; the root reads `(root)`. */
function where(instanceLocation: string): string {
  const path = instanceLocation.replace(/^#/, "");
  return path === "" ? "(root)" : path;
}

/**
 * One line from cfworker's error chain. The chain runs from the root to the failing keyword, so
 * the last unit is the most specific; a `false` schema unit (what `additionalProperties: false`
 * reports) is replaced by its parent's wording.
 */
function describe(errors: OutputUnit[]): string {
  const last = errors.at(-1);
  if (!last) return "does not match the schema";
  if (last.keyword === "false" && errors.length > 1) {
    const parent = errors.at(-2)!;
    const name = decodeURIComponent(last.instanceLocation.split("/").at(-1) ?? "");
    if (/additional|unevaluated/i.test(parent.keyword)) return `${where(parent.instanceLocation)}: unexpected property "${name}"`;
    return `${where(parent.instanceLocation)}: ${parent.error.replace(/\.$/, "")}`;
  }
  return `${where(last.instanceLocation)}: ${last.error.replace(/\.$/, "")}`;
}

function check(schema: object | boolean, value: unknown): string | null {
  let result;
  try {
    result = validatorFor(schema).validate(value);
  } catch (err) {
    // A schema cfworker cannot interpret (e.g. an unresolvable `#` reference) fails the check.
    return `schema could not be applied: ${err instanceof Error ? err.message : String(err)}`;
  }
  return result.valid ? null : describe(result.errors);
}

/** Checks tool arguments against the tool's `input_schema`: null when valid, else a short reason. */
export function validateInput(schema: object | boolean, value: unknown): string | null {
  return check(schema, value);
}

/** Checks successful `structured_content` against the tool's `output_schema`; null when valid. */
export function validateOutput(schema: object | boolean, value: unknown): string | null {
  return check(schema, value);
}
