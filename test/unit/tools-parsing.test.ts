/** The pure pieces of host tool calls: schema checks, Result checks, error classes. */
import { describe, expect, it } from "vitest";
import { validateInput, validateOutput } from "../../src/shared/json-schema.ts";
import { neverSent, parseResult } from "../../runner-host/tools/outcome.ts";

describe("json-schema", () => {
  const schema = {
    type: "object",
    properties: { n: { type: "integer" }, inner: { type: "object", properties: { s: { type: "string", minLength: 2 } } } },
    required: ["n"],
    additionalProperties: false,
  };

  it("returns null when valid and a short located reason when not", () => {
    expect(validateInput(schema, { n: 1 })).toBeNull();
    expect(validateInput(schema, {})).toBe('(root): Instance does not have required property "n"');
    expect(validateInput(schema, { n: 1, inner: { s: "x" } })).toBe("/inner/s: String is too short (1 < 2)");
    expect(validateInput(schema, { n: 1, extra: true })).toBe('(root): unexpected property "extra"');
    expect(validateOutput(schema, [])).toBe('(root): Instance type "array" is invalid. Expected "object"');
  });

  it("reuses the compiled validator across calls and honours $schema drafts", () => {
    for (let i = 0; i < 3; i++) expect(validateOutput(schema, { n: i })).toBeNull();
    const draft4 = { $schema: "http://json-schema.org/draft-04/schema#", type: "number", maximum: 5, exclusiveMaximum: true };
    expect(validateOutput(draft4, 5)).not.toBeNull();
    expect(validateOutput(draft4, 4)).toBeNull();
  });

  it("accepts boolean schemas", () => {
    expect(validateOutput(true, 1)).toBeNull();
    expect(validateOutput(false, 1)).not.toBeNull();
  });
});

describe("parseResult", () => {
  it("accepts Results and copies only their fields", () => {
    const r = { content: [{ type: "text", text: "t" }, { type: "image", data: "AA==", mime_type: "image/png" }], is_error: false, structured_content: null };
    expect(parseResult(r)).toEqual({ result: r });
  });

  it("rejects unknown fields, bad content and bad flags", () => {
    const problem = (v: unknown) => ("problem" in parseResult(v) ? (parseResult(v) as { problem: string }).problem : undefined);
    expect(problem({ content: [], extra: 1 })).toBe("extra: unknown field");
    expect(problem({})).toBe("content: required");
    expect(problem({ content: [{ type: "audio" }] })).toMatch(/^content\[0\]\.type: .*'text' \| 'image'/);
    expect(problem({ content: [{ type: "text", text: "t", annotations: {} }] })).toBe("content[0].annotations: unknown field");
    expect(problem({ content: [], is_error: "yes" })).toMatch(/^is_error: .*expected boolean/);
    expect(problem({ content: [{ type: "image", data: "AA==", mime_type: "" }] })).toMatch(/^content\[0\]\.mime_type: /);
    expect(problem([])).toMatch(/expected object/);
  });
});

describe("neverSent", () => {
  const fetchFailed = (cause: unknown) => new TypeError("fetch failed", { cause });
  const withCode = (code: string) => Object.assign(new Error(code), { code });

  it("is true only for failures that prove no connection was made", () => {
    expect(neverSent(fetchFailed(withCode("ECONNREFUSED")))).toBe(true);
    expect(neverSent(fetchFailed(withCode("ENOTFOUND")))).toBe(true);
    expect(neverSent(fetchFailed(new AggregateError([withCode("ECONNREFUSED"), withCode("ENETUNREACH")])))).toBe(true);
    expect(neverSent(fetchFailed(withCode("UND_ERR_SOCKET")))).toBe(false);
    expect(neverSent(fetchFailed(withCode("ECONNRESET")))).toBe(false);
    expect(neverSent(new Error("anything"))).toBe(false);
  });
});
