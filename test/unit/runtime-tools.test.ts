/**
 * The pure pieces of bindings and runtime tools: hidden parameters, descriptor equality, the
 * runner-host's wait for an executor's answer (budget, output schema, output cap at its edge), and
 * credential questions asked again after a reconnect.
 */
import { describe, expect, it } from "vitest";
import { hideParameters, mergeParameters, sameJson } from "../../src/session/bindings.ts";
import { TOOL_MAX_OUTPUT_BYTES } from "../../src/shared/config-tools.ts";
import { awaitRuntimeResult, RuntimeReplies } from "../../runner-host/tools/runtime-tool.ts";
import { SessionCredentials } from "../../runner-host/tools/credentials.ts";
import type { ToolResult } from "../../src/shared/result-schema.ts";

const ID = "a".repeat(32);

describe("binding parameters", () => {
  const tool = {
    name: "lookup",
    description: "d",
    input_schema: { type: "object", properties: { word: { type: "string" }, lang: { type: "string" } }, required: ["word", "lang"] },
  };

  it("are hidden from the model's schema: gone from properties and required", () => {
    expect(hideParameters(tool, { lang: "fr" }).input_schema).toEqual({ type: "object", properties: { word: { type: "string" } }, required: ["word"] });
    expect(hideParameters(tool, undefined)).toBe(tool);
    expect(tool.input_schema.required).toEqual(["word", "lang"]); // the original is untouched
  });

  it("are merged into every call's arguments and win over the model's", () => {
    expect(mergeParameters({ word: "chat", lang: "en" }, { lang: "fr" })).toEqual({ word: "chat", lang: "fr" });
    expect(mergeParameters({ word: "chat" }, undefined)).toEqual({ word: "chat" });
  });
});

describe("descriptor equality (rebinding)", () => {
  it("ignores key order and nothing else", () => {
    expect(sameJson({ a: 1, b: { c: [1, 2] } }, { b: { c: [1, 2] }, a: 1 })).toBe(true);
    expect(sameJson({ a: 1, b: { c: [1, 2] } }, { b: { c: [2, 1] }, a: 1 })).toBe(false);
    expect(sameJson([{ name: "x" }], [{ name: "x", output_schema: {} }])).toBe(false);
  });
});

describe("waiting for a runtime result", () => {
  const text = (n: number): ToolResult => ({ content: [{ type: "text", text: "x".repeat(n) }] });
  /** Text length whose Result JSON is exactly `bytes` long. */
  const fill = (bytes: number) => bytes - JSON.stringify(text(0)).length;

  it("passes a result of exactly 1 MiB and refuses one byte more, with unknown_outcome, naming the runtime limit", async () => {
    for (const [extra, ok] of [[0, true], [1, false]] as const) {
      const replies = new RuntimeReplies();
      const waiting = awaitRuntimeResult({ name: "t", input_schema: { type: "object" } }, ID, replies, new AbortController().signal);
      const r = text(fill(TOOL_MAX_OUTPUT_BYTES.default) + extra);
      replies.deliver(ID, r);
      const got = await waiting;
      if (ok) expect(got).toBe(r);
      else expect(got).toMatchObject({ is_error: true, unknown_outcome: true, content: [{ text: `tool "t" output exceeded the runtime tool result limit (${TOOL_MAX_OUTPUT_BYTES.default + 1} > ${TOOL_MAX_OUTPUT_BYTES.default})` }] });
    }
  });

  it("checks structured_content against the descriptor's output_schema (errors bypass it)", async () => {
    const d = { name: "t", input_schema: { type: "object" }, output_schema: { type: "object", required: ["n"] } };
    const run = async (r: ToolResult) => {
      const replies = new RuntimeReplies();
      const waiting = awaitRuntimeResult(d, ID, replies, new AbortController().signal);
      replies.deliver(ID, r);
      return waiting;
    };
    expect(await run({ content: [], structured_content: { n: 1 } })).toEqual({ content: [], structured_content: { n: 1 } });
    expect(await run({ content: [], structured_content: {} })).toMatchObject({ is_error: true, unknown_outcome: true });
    expect(await run({ content: [], is_error: true })).toEqual({ content: [], is_error: true });
  });

  it("an interrupted turn stops the wait with unknown_outcome, and a reply that comes later is dropped", async () => {
    const replies = new RuntimeReplies();
    const turn = new AbortController();
    const waiting = awaitRuntimeResult({ name: "t", input_schema: { type: "object" } }, ID, replies, turn.signal);
    turn.abort();
    expect(await waiting).toMatchObject({ is_error: true, unknown_outcome: true });
    expect(() => replies.deliver(ID, text(1))).not.toThrow();
  });
});

describe("credential questions", () => {
  it("are sent when asked, asked again after a reconnect, and end with the answer or the call's abort", async () => {
    const sent: string[] = [];
    let open = false;
    const creds = new SessionCredentials((id) => (sent.push(id), open));
    const answer = creds.ask(ID, new AbortController().signal);
    expect(sent).toEqual([ID]);
    open = true;
    creds.askAgain();
    expect(sent).toEqual([ID, ID]);
    creds.answer({ t: "credential", call_id: ID, value: { headers: { "X-Key": "v" } } });
    expect(await answer).toEqual({ headers: { "X-Key": "v" } });

    const stop = new AbortController();
    const stopped = creds.ask("b".repeat(32), stop.signal);
    stop.abort();
    expect(await stopped).toEqual({ error: expect.any(String) });
    creds.askAgain();
    expect(sent).toHaveLength(3); // nothing left to ask
    const refused = creds.ask("c".repeat(32), new AbortController().signal);
    creds.answer({ t: "credential", call_id: "c".repeat(32), error: "no override" });
    expect(await refused).toEqual({ error: "no override" });
  });
});
