/** The scripted provider itself, over plain fetch: the non-streaming path, errors and recording. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";

let provider: ScriptedProvider;
beforeAll(async () => {
  provider = await startScriptedProvider();
});
afterAll(() => provider.close());

const post = (body: unknown, path = "/chat/completions") =>
  fetch(`${provider.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer sp-key" },
    body: JSON.stringify(body),
  });

describe("scripted provider", () => {
  it("answers stream:false with a chat.completion and records the request", async () => {
    const before = provider.requests.length;
    const res = await post({ model: "m", messages: [{ role: "user", content: "hello there" }] });
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    expect(body.choices[0]).toMatchObject({ message: { role: "assistant", content: "echo: hello there" }, finish_reason: "stop" });
    expect(body.usage).toMatchObject({ prompt_tokens: 10, completion_tokens: 3 });
    const [recorded] = (await provider.waitForRequests(before + 1)).slice(before);
    expect(recorded).toMatchObject({ method: "POST", path: "/v1/chat/completions", headers: { authorization: "Bearer sp-key" } });
    expect(recorded!.body.messages[0].content).toBe("hello there");
  });

  it("answers a non-streaming tool directive with tool_calls", async () => {
    const res = await post({ model: "m", messages: [{ role: "user", content: [{ type: "text", text: '[[tool f {"a":[1,2]}]]' }] }] });
    const body = (await res.json()) as any;
    expect(body.choices[0].finish_reason).toBe("tool_calls");
    expect(body.choices[0].message.tool_calls[0]).toMatchObject({ type: "function", function: { name: "f", arguments: '{"a":[1,2]}' } });
  });

  it("streams SSE chunks, a usage chunk on request, and [DONE]", async () => {
    const res = await post({ model: "m", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "[[deltas 3 size=2]]" }] });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const frames = (await res.text()).split("\n\n").filter(Boolean).map((f) => f.replace(/^data: /, ""));
    expect(frames.at(-1)).toBe("[DONE]");
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f));
    expect(chunks.flatMap((c) => (c.choices[0]?.delta?.content ? [c.choices[0].delta.content] : []))).toEqual(["aa", "bb", "cc"]);
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { completion_tokens: 3 } });
  });

  it("answers error directives with an OpenAI-shaped error body, and unknown routes with 404", async () => {
    const res = await post({ model: "m", messages: [{ role: "user", content: "[[error 429]]" }] });
    expect(res.status).toBe(429);
    expect(await res.json()).toEqual({ error: { message: "Rate limit reached", type: "rate_limit_error", param: null, code: null } });
    expect((await post({}, "/embeddings")).status).toBe(404);
  });

  it("holds the answer of a [[hold NAME]] request until release(NAME), and answers later ones at once", async () => {
    const before = provider.requests.length;
    let answered = false;
    const held = post({ model: "m", messages: [{ role: "user", content: "[[hold gate-1]] [[error 500 boom]]" }] }).then((r) => ((answered = true), r));
    await provider.waitForRequests(before + 1);
    // Another request goes by while the held one waits.
    expect((await post({ model: "m", messages: [{ role: "user", content: "passing" }] })).status).toBe(200);
    expect(answered).toBe(false);
    provider.release("gate-1");
    const res = await held;
    expect(res.status).toBe(500);
    expect(((await res.json()) as any).error.message).toBe("boom");
    expect((await post({ model: "m", messages: [{ role: "user", content: "[[hold gate-1]] again" }] })).status).toBe(200);
  });
});

describe("scripted provider started with record: false (npm start, the CLI)", () => {
  it("keeps no request, still numbers its replies, and refuses to wait for requests", async () => {
    const quiet = await startScriptedProvider({ record: false });
    try {
      const ids: string[] = [];
      for (const text of ["one", "two"]) {
        const res = await fetch(`${quiet.url}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: text }] }) });
        const body = (await res.json()) as any;
        expect(body.choices[0].message.content).toBe(`echo: ${text}`);
        ids.push(body.id);
      }
      expect(ids).toEqual(["chatcmpl-scripted-1", "chatcmpl-scripted-2"]);
      expect(quiet.requests).toEqual([]);
      await expect(quiet.waitForRequests(1)).rejects.toThrow(/record: false/);
    } finally {
      await quiet.close();
    }
  });
});
