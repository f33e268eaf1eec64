/**
 * docs/api.md "Runtime calls": an executor's reply that was answered `200` is the call's result,
 * also when the turn is stopped (interrupt, close, shutdown, a lost runner-host) before the
 * runner-host records it; a call with no accepted reply ends with `unknown_outcome`, and a reply
 * after the stop is refused.
 */
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { parseHostConfig } from "../../src/shared/config-schema.ts";
import { newId } from "../../src/shared/ids.ts";
import { RunnerLink } from "../../src/session/runner-link.ts";
import { RuntimeCalls } from "../../src/session/runtime-calls.ts";
import { SessionState } from "../../src/session/session-state.ts";
import { Turns } from "../../src/session/turns.ts";
import { env, freshSession, ok } from "./helpers.ts";

const parsed = parseHostConfig({ tokens: [{ token_env: "T", tenant: "acme" }], harnesses: { pi: { command: ["node"] } } });
if (!parsed.ok) throw new Error(parsed.problems.join("; "));
const limits = parsed.config.limits;
const NOW = "2026-01-01T00:00:00.000Z";

type Parts = { s: SessionState; turns: Turns; runtime: RuntimeCalls; state: DurableObjectState };

/** A created session's object, its state, turns and runtime calls as the object builds them. */
async function inSession(fn: (p: Parts) => void): Promise<void> {
  const { n, stub } = freshSession();
  ok(await stub.create(n));
  await runInDurableObject(stub, (_, state) => {
    const s = new SessionState(state.storage);
    fn({ s, turns: new Turns(s), runtime: new RuntimeCalls(s, new RunnerLink(state, s), env), state });
  });
}

describe("an executor's accepted reply and a stop that overtakes it", () => {
  it("the accepted result is the call's tool.result; a call without one ends with unknown_outcome; a later reply is refused", async () => {
    await inSession(({ s, turns, runtime, state }) => {
      s.send({ type: "user.message", text: "two jobs" }, limits, NOW);
      const turn = turns.start(NOW)!.input.event_id;
      const [answered, pending] = [newId(), newId()];
      [answered, pending].forEach((id, i) => {
        turns.apply({ t: "tool_call", seq: i + 1, turn, call: { id, name: "job", arguments: {} }, dispatched: true }, NOW, limits.session_bytes);
        state.storage.sql.exec("INSERT INTO runtime_calls (call_id, executor) VALUES (?, ?)", id, newId());
      });
      const result = { content: [{ type: "text" as const, text: "done" }] };
      // The executor's reply is accepted and on its way down the runner link when the interrupt lands.
      expect(runtime.reply(answered, result)).toEqual({ ok: true, value: undefined });
      const events = s.endWork(NOW, "interrupted", { running: { code: "conflict", message: "interrupted" }, queued: "interrupted" });
      const recorded = Object.fromEntries(events.filter((e) => e.event.type === "tool.result").map((e) => [e.event.data.call_id, e.event.data.result]));
      expect(recorded[answered]).toEqual(result);
      expect(recorded[pending]).toMatchObject({ is_error: true, unknown_outcome: true });
      expect(runtime.reply(pending, result).ok).toBe(false);
      expect(runtime.reply(answered, result).ok).toBe(false);
    });
  });

  it("the reply is checked against its descriptor as it is accepted: a stop that overtakes it records the checked result", async () => {
    await inSession(({ s, turns, runtime, state }) => {
      const job = { name: "job", description: "d", input_schema: { type: "object" }, output_schema: { type: "object", required: ["n"] } };
      s.set({ bindings: JSON.stringify([{ alias: "jobs", tools: ["job"], executor: newId(), runtime: [job] }]) });
      s.send({ type: "user.message", text: "three jobs" }, limits, NOW);
      const turn = turns.start(NOW)!.input.event_id;
      const [fits, wrong, big, edge] = [newId(), newId(), newId(), newId()];
      [fits, wrong, big, edge].forEach((id, i) => {
        turns.apply({ t: "tool_call", seq: i + 1, turn, call: { id, name: "job", arguments: {} }, dispatched: true }, NOW, limits.session_bytes);
        state.storage.sql.exec("INSERT INTO runtime_calls (call_id, executor, tool) VALUES (?, ?, 'job')", id, newId());
      });
      const good = { content: [], structured_content: { n: 1 } };
      ok(runtime.reply(fits, good));
      ok(runtime.reply(wrong, { content: [], structured_content: { m: 1 } }));
      // The runtime tool result limit at its edge: a Result of exactly 1 MiB as JSON is kept, one byte more is not.
      const sized = (bytes: number) => {
        const shell = JSON.stringify({ content: [{ type: "text", text: "" }], structured_content: { n: 1 } }).length;
        return { content: [{ type: "text" as const, text: "x".repeat(bytes - shell) }], structured_content: { n: 1 } };
      };
      ok(runtime.reply(edge, sized(1_048_576)));
      ok(runtime.reply(big, sized(1_048_577)));
      const events = s.endWork(NOW, "interrupted", { running: { code: "conflict", message: "interrupted" }, queued: "interrupted" });
      const recorded = Object.fromEntries(events.filter((e) => e.event.type === "tool.result").map((e) => [e.event.data.call_id, e.event.data.result]));
      expect(recorded[fits]).toEqual(good);
      expect(recorded[wrong]).toEqual({
        content: [{ type: "text", text: 'tool "job" returned structured_content that does not match its output_schema: (root): Instance does not have required property "n"' }],
        is_error: true,
        unknown_outcome: true,
      });
      expect(recorded[edge]).toEqual(sized(1_048_576));
      expect(recorded[big]).toEqual({ content: [{ type: "text", text: 'tool "job" output exceeded the runtime tool result limit (1048577 > 1048576)' }], is_error: true, unknown_outcome: true });
    });
  });
});
