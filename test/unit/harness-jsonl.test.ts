import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import {
  attachJsonlReader,
  FramingError,
  JsonlDecoder,
  MAX_LINE_DEPTH,
  serializeJsonLine,
  type JsonObject,
} from "../../runner-host/harness/jsonl.ts";

const values = (results: ReturnType<JsonlDecoder["push"]>) => results.map((r) => (r.ok ? r.value : r.error.message));

describe("svc-harness/1 JSON-lines framing", () => {
  it("splits on LF only: U+2028 and U+2029 inside a string do not end a line", () => {
    const d = new JsonlDecoder();
    const out = d.push('{"t":"a\u2028b\u2029c"}\n{"n":2}\n');
    expect(values(out)).toEqual([{ t: "a\u2028b\u2029c" }, { n: 2 }]);
  });

  it("a lone surrogate (a model's broken output) becomes U+FFFD, in strings and member names; escaped pairs stay whole", () => {
    const d = new JsonlDecoder();
    const out = d.push('{"t":"a\\ud800b","args":{"q":["x\\udfff"],"k\\udc00":1},"pair":"\\ud83d\\ude00","slash":"\\\\ud800"}\n');
    expect(values(out)).toEqual([{ t: "a\ufffdb", args: { q: ["x\ufffd"], "k\ufffd": 1 }, pair: "😀", slash: "\\ud800" }]);
  });

  it("takes a line nesting exactly 128 levels (brackets inside strings not counted); one level more is a framing error", () => {
    // `{"a":` repeated: the line's object is level 1.
    const nested = (levels: number) => `${'{"a":'.repeat(levels - 1)}{"s":"[[[{{{"}${"}".repeat(levels - 1)}\n`;
    expect(MAX_LINE_DEPTH).toBe(128);
    const ok = new JsonlDecoder().push(nested(128));
    expect(ok).toHaveLength(1);
    expect(ok[0]!.ok).toBe(true);
    expect(values(new JsonlDecoder().push(nested(129)))).toEqual(["line nests deeper than 128 levels"]);
    // Thousands deep: refused before anything recursive meets it.
    expect(values(new JsonlDecoder().push(nested(20_000)))).toEqual(["line nests deeper than 128 levels"]);
  });

  it("strips one trailing CR (CRLF input)", () => {
    const d = new JsonlDecoder();
    expect(values(d.push('{"a":1}\r\n{"b":2}\r\n'))).toEqual([{ a: 1 }, { b: 2 }]);
  });

  it("keeps a partial line until its LF arrives", () => {
    const d = new JsonlDecoder();
    expect(d.push('{"a":')).toEqual([]);
    expect(values(d.push('1}\n{"b"'))).toEqual([{ a: 1 }]);
    expect(values(d.push(":2}\n"))).toEqual([{ b: 2 }]);
  });

  it("decodes a UTF-8 sequence split across chunks, byte by byte", () => {
    const bytes = Buffer.from('{"t":"héllo 😀 ✓"}\n', "utf8");
    const d = new JsonlDecoder();
    const out = [...bytes].flatMap((b) => d.push(Buffer.from([b])));
    expect(values(out)).toEqual([{ t: "héllo 😀 ✓" }]);
  });

  it("reports an over-long line, counting UTF-8 bytes, and yields nothing after it", () => {
    const d = new JsonlDecoder(20);
    const line = `{"t":"${"é".repeat(8)}"}\n`; // 16 chars, 24 bytes
    const out = d.push(`{"ok":1}\n${line}{"later":1}\n`);
    expect(out[0]).toEqual({ ok: true, value: { ok: 1 } });
    expect(out[1]?.ok).toBe(false);
    expect(!out[1]!.ok && out[1]!.error).toBeInstanceOf(FramingError);
    expect(values(out)[1]).toMatch(/exceeds 20 bytes/);
    expect(out).toHaveLength(2);
    expect(d.push('{"more":1}\n')).toEqual([]);
  });

  it("reports an over-long partial line before its LF arrives", () => {
    const d = new JsonlDecoder(64);
    const out = d.push(`{"t":"${"x".repeat(100)}`);
    expect(values(out)).toEqual([expect.stringMatching(/exceeds 64 bytes/)]);
  });

  it("counts a partial line's UTF-8 bytes, not its characters, across chunks: refused once its bytes pass the maximum", () => {
    const d = new JsonlDecoder(64);
    expect(d.push(`{"t":"${"✓".repeat(10)}`)).toEqual([]); // 16 chars, 36 bytes
    expect(values(d.push("✓".repeat(10)))).toEqual([expect.stringMatching(/exceeds 64 bytes/)]); // 26 chars, 66 bytes
  });

  it("a line at the maximum that arrives in many pieces, with a final CR, is one message", () => {
    const d = new JsonlDecoder(64);
    const line = `{"t":"${"ü".repeat(28)}"}`; // 64 bytes
    const pieces = [...Buffer.from(`${line}\r\n`)].map((b) => Buffer.from([b]));
    expect(values(pieces.flatMap((p) => d.push(p)))).toEqual([{ t: "ü".repeat(28) }]);
  });

  it.each([
    ["garbage", "hello world"],
    ["a truncated object", '{"a":'],
    ["an array", "[1,2]"],
    ["a number", "42"],
    ["null", "null"],
    ["a string", '"s"'],
    ["an empty line", ""],
  ])("reports %s as a framing error, never skipping it", (_, line) => {
    const d = new JsonlDecoder();
    const out = d.push(`${line}\n{"after":1}\n`);
    expect(out).toHaveLength(1);
    expect(out[0]!.ok).toBe(false);
  });

  it("scrubs a bad line before quoting any of it, so a secret cut by the quote does not survive in part", () => {
    const key = "sk-provider-KEY-0123456789abcdefghij";
    const scrub = (l: string) => l.split(key).join("[redacted]");
    for (const pad of [0, 40, 60, 70, 75]) {
      for (const line of [`${"x".repeat(pad)} ${key}`, `[${"1,".repeat(pad / 2)}"${key}"]`]) {
        const d = new JsonlDecoder(undefined, scrub);
        const [message] = values(d.push(`${line}\n`));
        expect(message).toMatch(/unparsable line|not a JSON object/);
        for (let n = 6; n <= key.length; n++) expect(String(message), `pad ${pad}`).not.toContain(key.slice(0, n));
      }
    }
  });

  it("reports bytes left without LF at end of stream; a clean end reports nothing", () => {
    const cut = new JsonlDecoder();
    cut.push('{"a":1}\n{"b"');
    expect(values(cut.end())).toEqual([expect.stringMatching(/stream ended inside a line/)]);
    const clean = new JsonlDecoder();
    clean.push('{"a":1}\n');
    expect(clean.end()).toEqual([]);
  });

  it("reads a stream with attachJsonlReader and signals a clean end", async () => {
    const got: JsonObject[] = [];
    const errors: string[] = [];
    await new Promise<void>((resolve) => {
      attachJsonlReader(Readable.from([Buffer.from('{"a":1}\n{"b":'), Buffer.from("2}\n")]), {
        onMessage: (v) => got.push(v),
        onError: (e) => errors.push(e.message),
        onEnd: resolve,
      });
    });
    expect(got).toEqual([{ a: 1 }, { b: 2 }]);
    expect(errors).toEqual([]);
  });

  it("reports a cut-off final line from a stream as an error, not as an end", async () => {
    const errors: string[] = [];
    let ended = false;
    const stream = Readable.from(['{"a":1}\n', '{"b":2}']);
    attachJsonlReader(stream, { onMessage: () => {}, onError: (e) => errors.push(e.message), onEnd: () => (ended = true) });
    await new Promise((r) => stream.on("end", r));
    expect(errors).toEqual([expect.stringMatching(/stream ended inside a line/)]);
    expect(ended).toBe(false);
  });

  it("serialises one object per line with newlines inside strings escaped", () => {
    const line = serializeJsonLine({ text: "two\nlines", u: "\u2028" });
    expect(line.endsWith("\n")).toBe(true);
    expect(line.slice(0, -1)).not.toContain("\n");
    expect(values(new JsonlDecoder().push(line))).toEqual([{ text: "two\nlines", u: "\u2028" }]);
  });
});
