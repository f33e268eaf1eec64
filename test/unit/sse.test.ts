/** The SSE frame encoder (docs/api.md "SSE": frames and keepalive). */
import { describe, expect, it } from "vitest";
import type { Event } from "../../src/shared/api-schema.ts";
import { encodeEvent, KEEPALIVE } from "../../src/sse/frame.ts";

const decoder = new TextDecoder();
const encoder = new TextEncoder();

const retained = (text: string): Event => ({
  id: "0123456789abcdef0123456789abcdef",
  type: "user.message",
  time: "2026-01-01T00:00:00.000Z",
  data: { type: "user.message", text, delivery: "queue" },
  cursor: "AQAAAAEAAAAAAAVXYZ-_abcdefghijklmnop",
});

const liveOnly = (text: string): Event => ({
  id: "fedcba9876543210fedcba9876543210",
  type: "assistant.delta",
  time: "2026-01-01T00:00:00.000Z",
  data: { text },
  input_id: "0123456789abcdef0123456789abcdef",
});

/** SSE line terminators are CRLF, LF and CR (nothing else). */
const sseLines = (frame: string) => frame.split(/\r\n|\r|\n/);

describe("SSE frames", () => {
  it("writes a retained event as id: <cursor>, then event: <type>, then data: <JSON envelope>, then a blank line", () => {
    const e = retained("hello");
    const f = encodeEvent(e);
    expect(decoder.decode(f.bytes)).toBe(`id: ${e.cursor}\nevent: user.message\ndata: ${JSON.stringify(e)}\n\n`);
  });

  it("writes a live-only event without an id line", () => {
    const e = liveOnly("partial");
    expect(decoder.decode(encodeEvent(e).bytes)).toBe(`event: assistant.delta\ndata: ${JSON.stringify(e)}\n\n`);
  });

  it("keeps text with newlines, carriage returns, U+2028 and U+2029 on one data line", () => {
    const text = "line one\nline two\r\nthree\rfour\u2028five\u2029six\n\n";
    for (const e of [retained(text), liveOnly(text)]) {
      const frame = decoder.decode(encodeEvent(e).bytes);
      const lines = sseLines(frame);
      const expected = e.cursor ? 3 : 2;
      expect(lines).toHaveLength(expected + 2);
      expect(lines.slice(expected)).toEqual(["", ""]);
      const data = lines.filter((l) => l.startsWith("data: "));
      expect(data).toHaveLength(1);
      expect(JSON.parse(data[0]!.slice(6))).toEqual(e);
    }
  });

  it("reports dataLength as the UTF-8 byte length of the JSON envelope", () => {
    for (const text of ["ascii", "ünïcödé", "emoji 😀😀", "\u2028", "lone \ud800 surrogate", ""]) {
      const e = liveOnly(text);
      const f = encodeEvent(e);
      expect(f.dataLength).toBe(encoder.encode(JSON.stringify(e)).length);
    }
    const wide = liveOnly("é".repeat(100));
    expect(encodeEvent(wide).dataLength).toBe(JSON.stringify(wide).length + 100);
  });

  it("writes valid UTF-8 even for a lone surrogate in the text", () => {
    const e = liveOnly("a\ud800b");
    const text = new TextDecoder("utf-8", { fatal: true }).decode(encodeEvent(e).bytes);
    expect(text).toContain("\\ud800");
  });

  it("writes keepalives as the comment frame : keepalive", () => {
    expect(decoder.decode(KEEPALIVE)).toBe(": keepalive\n\n");
  });
});
