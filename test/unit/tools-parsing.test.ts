/** The pure pieces of host tool calls: the SSE parser, schema checks, Result checks, error classes. */
import { describe, expect, it } from "vitest";
import { validateInput, validateOutput } from "../../runner-host/tools/json-schema.ts";
import { neverSent, parseResult } from "../../runner-host/tools/outcome.ts";
import { SseParser, type SseEvent } from "../../runner-host/tools/sse.ts";

/** Feeds `text` split at every `size` characters and collects everything, end included. */
function parse(text: string, size: number): SseEvent[] {
  const p = new SseParser();
  const out: SseEvent[] = [];
  for (let i = 0; i < text.length; i += size) out.push(...p.push(text.slice(i, i + size)));
  return out.concat(p.end());
}

describe("SseParser", () => {
  const stream = ': hello\r\nevent: progress\r\ndata: {"a":\r\ndata:1}\r\n\r\nevent: progress\rdata: 2\r\rdata\n\nevent: result\ndata: {}\n\n';
  const expected = [
    { event: "progress", data: '{"a":\n1}' },
    { event: "progress", data: "2" },
    { event: "message", data: "" },
    { event: "result", data: "{}" },
  ];

  it("handles CRLF, CR and LF endings, multi-line data and comments in any chunking", () => {
    for (const size of [1, 2, 3, 5, 7, 1000]) expect(parse(stream, size)).toEqual(expected);
  });

  it("does not dispatch an event without data, and resets its name", () => {
    expect(parse("event: progress\n\ndata: x\n\n", 4)).toEqual([{ event: "message", data: "x" }]);
  });

  it("drops an event unfinished at end of stream, but a final CR ends the blank line", () => {
    expect(parse("event: result\ndata: {}\n", 3)).toEqual([]);
    expect(parse("event: result\rdata: {}\r\r", 3)).toEqual([{ event: "result", data: "{}" }]);
  });

  it("removes only one space after the colon", () => {
    expect(parse("data:  two\n\n", 100)).toEqual([{ event: "message", data: " two" }]);
  });
});

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
  it("accepts spec Results and copies only their fields", () => {
    const r = { content: [{ type: "text", text: "t" }, { type: "image", data: "AA==", mime_type: "image/png" }], is_error: false, structured_content: null };
    expect(parseResult(r)).toEqual({ result: r });
  });

  it("rejects unknown fields, bad content and bad flags", () => {
    expect(parseResult({ content: [], extra: 1 })).toEqual({ problem: 'unknown field "extra"' });
    expect(parseResult({})).toEqual({ problem: "`content` must be an array" });
    expect(parseResult({ content: [{ type: "audio" }] })).toEqual({ problem: 'content[0]: type must be "text" or "image"' });
    expect(parseResult({ content: [{ type: "text", text: "t", annotations: {} }] })).toEqual({ problem: 'content[0]: unknown field "annotations"' });
    expect(parseResult({ content: [], is_error: "yes" })).toEqual({ problem: "`is_error` must be a boolean" });
    expect(parseResult([])).toEqual({ problem: "not a JSON object" });
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
