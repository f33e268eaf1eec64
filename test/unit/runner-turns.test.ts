/**
 * RunnerHost end to end against a fake object side, the real reference harness and the scripted
 * provider: control hello, attach, open, turns, tools, interrupts, crashes and key rotation.
 */
import { afterEach, describe, expect, it } from "vitest";
import { CapacitySchema, RUNNER_PROTOCOL, type LinkUp } from "../../src/shared/runner-protocol.ts";
import { verifyInspectionToken } from "../../src/shared/inspection-token.ts";
import { RUNNER_SECRET } from "./runner-fake-service.ts";
import { commandHarness, inlineHarness, OPENED } from "./harness-helpers.ts";
import { alive, INSPECT, MCP_PROBE, opened, Rig, SLOW, TOOL_TOKEN, turnEnd, WEATHER } from "./runner-setup.ts";

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.stop();
  rig = undefined;
});

const kinds = (ms: LinkUp[]) => ms.map((m) => m.t);

describe("runner-host turns", () => {
  it("says hello with its boot and capacity, then runs a turn: delta*, assistant, native, turn_end in order", async () => {
    rig = await Rig.start();
    const control = await rig.svc.control();
    const hello = control.messages.items[0]!;
    expect(hello).toMatchObject({ t: "hello", protocol: RUNNER_PROTOCOL, boot: rig.host.boot, harnesses: ["ref"], draining: false });
    expect(hello.t === "hello" && CapacitySchema.parse(hello.capacity)).toEqual({ loaded: 0, loaded_limit: 1024, idle: 0 });

    const t0 = performance.now();
    const fake = await rig.open("sess-a");
    expect(await fake.hellos.next()).toEqual({ t: "hello", down: 0 });
    await opened(fake);
    const turn = rig.run(fake, "[[deltas 40 size=4]] [[usage prompt=12 completion=40]]");
    const end = await turnEnd(fake, turn);
    const coldFirstDelta = firstDeltaMs(fake, turn, t0);
    expect(end).toMatchObject({ status: "completed" });
    expect(end.error).toBeUndefined();

    const events = turnWindow(fake, turn);
    const numbered = events.filter((m) => m.t !== "delta");
    expect(kinds(numbered)).toEqual(["native", "assistant", "native", "turn_end"]);
    const text = events.flatMap((m) => (m.t === "delta" ? [m.text] : [])).join("");
    const assistant = numbered.find((m) => m.t === "assistant")!;
    expect(assistant.t === "assistant" && assistant.text).toBe(text);
    expect(text).toHaveLength(160);
    // Deltas were coalesced: fewer socket messages than provider tokens, and all before the assistant message.
    const deltaCount = events.filter((m) => m.t === "delta").length;
    expect(deltaCount).toBeLessThan(40);
    expect(events.findIndex((m) => m.t === "assistant")).toBeGreaterThan(events.findLastIndex((m) => m.t === "delta"));
    expect(assistant).toMatchObject({ usage: { input_tokens: 12, output_tokens: 40 }, stop_reason: "stop" });
    const records = numbered.flatMap((m) => (m.t === "native" ? m.records : [])) as { role: string }[];
    expect(records.map((r) => r.role)).toEqual(["user", "assistant"]);
    expect(fake.errors).toEqual([]);
    expect(fake.duplicates).toBe(0);

    // Warm: the session is resident, the process running.
    const t1 = performance.now();
    const turn2 = rig.run(fake, "[[deltas 3]] again");
    await turnEnd(fake, turn2);
    const warmFirstDelta = firstDeltaMs(fake, turn2, t1);
    console.log(`runner-host first delta: cold ${coldFirstDelta.toFixed(0)} ms (attach+spawn+open+run), warm ${warmFirstDelta.toFixed(1)} ms`);

    // The second turn's request carried the first turn's conversation.
    const last = rig.provider.requests.at(-1)!;
    expect(last.body.messages.map((m: { role: string }) => m.role)).toEqual(["system", "user", "assistant", "user"]);
    expect(rig.host.capacity()).toEqual({ loaded: 1, loaded_limit: 1024, idle: 1 });
  });

  it("answers open_failed with the harness message for a model missing from the catalog", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-missing", { model: "openai/no-such-model" });
    const m = await fake.ups.next((m) => m.t === "open_failed" || m.t === "opened");
    expect(m).toMatchObject({ t: "open_failed" });
    expect(m.t === "open_failed" && m.message).toMatch(/no-such-model/);
    // A run after a failed open fails with the same reason, as a service error.
    const turn = rig.run(fake, "hello");
    expect(await turnEnd(fake, turn)).toMatchObject({ status: "failed", error: { code: "service_error" } });
  });

  it("a harness process that cannot start fails the open saying why, and the runner-host's log says why too", async () => {
    rig = await Rig.start({ harness: { command: ["/nonexistent/harness-binary"] } });
    const fake = await rig.open("sess-nostart");
    const m = await fake.ups.next((m) => m.t === "open_failed" || m.t === "opened");
    expect(m.t === "open_failed" && m.message).toMatch(/could not start: .*nonexistent\/harness-binary ENOENT/);
    const line = await rig.logs.next((l) => l.msg === "harness process ended");
    expect(line.fields).toMatchObject({ reason: "spawn_failed", message: expect.stringMatching(/nonexistent\/harness-binary ENOENT/) });
  });

  it("answers open_failed saying the reasoning effort is unsupported", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-effort", { reasoning_effort: "high" });
    const m = await fake.ups.next((m) => m.t === "open_failed" || m.t === "opened");
    expect(m.t === "open_failed" && m.message).toMatch(/effort/i);
  });

  it("runs a host tool: tool_call (dispatched), progress, tool_result, with traceparent and bearer, then the turn goes on", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-tool");
    await opened(fake);
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const turn = rig.run(fake, `[[tool get_weather {"city":"Paris"}]]`, { traceparent });
    const end = await turnEnd(fake, turn);
    expect(end.status).toBe("completed");

    const events = fake.turn(turn).filter((m) => m.t !== "delta");
    const call = events.find((m) => m.t === "tool_call")!;
    expect(call).toMatchObject({ t: "tool_call", call: { name: "get_weather", arguments: { city: "Paris" } }, dispatched: true });
    const callId = call.t === "tool_call" ? call.call.id : "";
    expect(callId).toMatch(/^[a-f0-9]{32}$/);
    expect(kinds(events.filter((m) => m.t !== "native"))).toEqual(["assistant", "tool_call", "progress", "tool_result", "assistant", "turn_end"]);
    expect(events.find((m) => m.t === "progress")).toEqual({ t: "progress", turn, call_id: callId, data: { step: 1 } });
    expect(events.find((m) => m.t === "tool_result")).toMatchObject({ call_id: callId, result: { content: [{ type: "text", text: "sunny, 21 C" }] } });

    const hit = rig.tools.calls.items[0]!;
    expect(hit.headers.traceparent).toBe(traceparent);
    expect(hit.headers.authorization).toBe(`Bearer ${TOOL_TOKEN}`);
    expect(hit.body).toMatchObject({ call_id: callId, tool: "get_weather", arguments: { city: "Paris" }, scope: { tenant_id: "acme", call_id: callId } });
    // The harness got the result: the follow-up request quotes it.
    expect(JSON.stringify(rig.provider.requests.at(-1)!.body.messages)).toContain("sunny, 21 C");
  });

  // Every host transport: plain HTTP, HTTP with an inspection token (the tool reads the session
  // back), and MCP (whose server sees the initialize first). Two parallel calls; the object
  // acknowledges only the first: it is made and answered, while the second, sent up at the same
  // moment, stays undispatched until its own ack.
  it.each([
    ["an HTTP tool", WEATHER.name, "/weather"],
    ["an inspect_session tool", INSPECT.name, "/inspect"],
    ["an MCP tool", MCP_PROBE.name, "/mcp"],
  ])("dispatches %s only after the object acknowledged its tool_call (tool.call before dispatch)", async (_kind, name, path) => {
    rig = await Rig.start();
    const fake = await rig.open("sess-ack", { tools: [WEATHER, INSPECT, MCP_PROBE] });
    await opened(fake);
    fake.autoAck = false;
    const turn = rig.run(fake, `[[tool ${name} {"city":"Oslo"}]] [[tool ${name} {"city":"Rome"}]]`);
    const first = await fake.ups.next((m) => m.t === "tool_call");
    const second = await fake.ups.next((m) => m.t === "tool_call");
    if (first.t !== "tool_call" || second.t !== "tool_call") throw new Error("expected two tool calls");
    fake.sendRaw({ t: "ack", up: first.seq });
    await fake.ups.find((m) => m.t === "tool_result" && m.call_id === first.call.id);
    // One request per call here (an MCP call ends at its refused initialize).
    expect(rig.tools.calls.items.map((c) => c.path)).toEqual([path]);
    const ackedAt = performance.now();
    fake.autoAck = true;
    fake.ack();
    expect((await turnEnd(fake, turn)).status).toBe("completed");
    const [, later] = rig.tools.calls.items;
    expect(rig.tools.calls.items).toHaveLength(2);
    expect(later).toMatchObject({ path });
    expect(later!.at).toBeGreaterThan(ackedAt);
  });

  it("never dispatches a host call whose tool_call the object did not acknowledge before the turn ended", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-noack");
    await opened(fake);
    fake.autoAck = false;
    const turn = rig.run(fake, `[[tool get_weather {"city":"Rome"}]]`);
    const call = await fake.ups.find((m) => m.t === "tool_call");
    fake.send({ t: "interrupt", turn });
    fake.autoAck = true;
    fake.ack();
    expect((await turnEnd(fake, turn)).status).toBe("interrupted");
    const result = fake.ups.items.find((m) => m.t === "tool_result")!;
    expect(result).toMatchObject({ call_id: call.t === "tool_call" ? call.call.id : "", result: { is_error: true } });
    expect(result.t === "tool_result" && result.result.unknown_outcome).toBeFalsy();
    expect(rig.tools.calls.items).toHaveLength(0);
  });

  it("gives an inspect_session tool the service URL and an inspection token for this session and call", async () => {
    rig = await Rig.start();
    const sessionId = "ab".repeat(16);
    const fake = await rig.open("sess-inspect", { session_id: sessionId });
    await opened(fake);
    const turn = rig.run(fake, `[[tool ${INSPECT.name} {}]]`);
    expect((await turnEnd(fake, turn)).status).toBe("completed");
    const call = fake.ups.items.find((m) => m.t === "tool_call")!;
    const callId = call.t === "tool_call" ? call.call.id : "";
    const { scope } = rig.tools.calls.items[0]!.body;
    expect(scope).toMatchObject({ tenant_id: "acme", session_id: sessionId, call_id: callId, service_url: rig.config.public_url });
    expect(await verifyInspectionToken(RUNNER_SECRET, scope.inspection_token)).toEqual({ tenant: "acme", session: sessionId, call: callId });
    // Still valid once the call's timeout (300 s) has passed: the grace comes on top.
    expect(await verifyInspectionToken(RUNNER_SECRET, scope.inspection_token, Date.now() + 300_000)).toBeDefined();
  });

  it("refuses an enabled name no host tool serves, forwards the harness's own answer for an unknown one, and the turn goes on", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-unknown");
    await opened(fake);
    const turn = rig.run(fake, `[[tool orphan_tool {}]] [[tool not_a_tool {"x":1}]]`);
    const end = await turnEnd(fake, turn);
    expect(end.status).toBe("completed");
    const events = fake.turn(turn);
    const calls = events.filter((m) => m.t === "tool_call");
    const results = events.filter((m) => m.t === "tool_result");
    // pi answers the unknown name at once, so the two may come in either order.
    expect(calls.map((c) => c.t === "tool_call" && [c.call.name, c.dispatched]).sort()).toEqual([
      ["not_a_tool", false],
      ["orphan_tool", false],
    ]);
    expect(results).toHaveLength(2);
    const byCall = new Map(results.map((r) => (r.t === "tool_result" ? [r.call_id, r.result] : ["", null])));
    const callIdOf = (name: string) => calls.flatMap((c) => (c.t === "tool_call" && c.call.name === name ? [c.call.id] : []))[0]!;
    const [orphan, unknown] = [byCall.get(callIdOf("orphan_tool")), byCall.get(callIdOf("not_a_tool"))];
    expect(orphan).toMatchObject({ is_error: true, content: [{ text: "tool orphan_tool is not configured on this runner-host" }] });
    expect(orphan?.unknown_outcome).toBeUndefined();
    expect(unknown).toMatchObject({ is_error: true });
    expect(rig.tools.calls.items).toHaveLength(0);

    // A host tool whose `tenants` no longer include the session's tenant: refused, saying so.
    const other = await rig.open("sess-other-tenant", { tenant: "beta" });
    await opened(other);
    const t2 = rig.run(other, `[[tool ${WEATHER.name} {"city":"Oslo"}]]`);
    expect((await turnEnd(other, t2)).status).toBe("completed");
    const refused = other.turn(t2).find((m) => m.t === "tool_result");
    expect(refused?.t === "tool_result" && refused.result).toMatchObject({ is_error: true, content: [{ text: `tool ${WEATHER.name} is not enabled for this session's tenant` }] });
    expect(rig.tools.calls.items).toHaveLength(0);
  });

  it("never runs a host tool whose arguments the model did not complete: the harness's refusal is recorded, the tool sees nothing", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-bad-args");
    await opened(fake);
    const turn = rig.run(fake, `[[tool get_weather {"city":"Pa]]`);
    const end = await turnEnd(fake, turn);
    expect(end.status).toBe("completed");
    const events = fake.turn(turn).filter((m) => m.t !== "delta" && m.t !== "native");
    expect(kinds(events)).toEqual(["assistant", "tool_call", "tool_result", "assistant", "turn_end"]);
    const call = events[1]!;
    expect(call).toMatchObject({ t: "tool_call", call: { name: "get_weather" }, dispatched: false });
    const result = events[2]!;
    expect(result).toMatchObject({
      t: "tool_result",
      call_id: call.t === "tool_call" ? call.call.id : "",
      result: { is_error: true, content: [{ text: expect.stringMatching(/^the arguments of this call to "get_weather" are not complete JSON.*it was not run$/) }] },
    });
    expect(result.t === "tool_result" && result.result.unknown_outcome).toBeFalsy();
    expect(rig.tools.calls.items).toHaveLength(0);
  });

  it("interrupts a streaming turn: turn_end interrupted with conflict", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-int");
    await opened(fake);
    const turn = rig.run(fake, "[[deltas 2000]] [[delay 5]]");
    await fake.ups.find((m) => m.t === "delta" && m.turn === turn);
    fake.send({ t: "interrupt", turn });
    const end = await turnEnd(fake, turn);
    expect(end).toMatchObject({ status: "interrupted", error: { code: "conflict" } });
    // Still usable: the next turn completes.
    const next = rig.run(fake, "after");
    expect((await turnEnd(fake, next)).status).toBe("completed");
  });

  it("interrupts a turn waiting on a host tool: the call gets one tool_result with unknown_outcome", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-int-tool");
    await opened(fake);
    const turn = rig.run(fake, `[[tool ${SLOW.name} {}]]`);
    await rig.tools.calls.next((c) => c.path === "/slow");
    fake.send({ t: "interrupt", turn });
    const end = await turnEnd(fake, turn);
    expect(end).toMatchObject({ status: "interrupted", error: { code: "conflict" } });
    const events = fake.turn(turn);
    const calls = events.filter((m) => m.t === "tool_call");
    const results = events.filter((m) => m.t === "tool_result");
    expect(calls).toHaveLength(1);
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ result: { is_error: true, unknown_outcome: true } });
    expect(events.indexOf(results[0]!)).toBeLessThan(events.indexOf(end));
  });

  it("a harness that does not end an interrupted turn is killed after 10 s, also when its session leaves meanwhile; the next lease runs in a new process", async () => {
    // Answers every command, the interrupt included, but never ends a turn asked for "deaf".
    const deaf = inlineHarness(
      "deaf",
      `out({ type: "assistant.delta", session: cmd.session, turn: cmd.turn, text: "x" });
       if (cmd.text !== "deaf") out({ type: "turn.end", session: cmd.session, turn: cmd.turn, status: "completed" });`,
    );
    rig = await Rig.start({ harness: { command: deaf } });
    const fake = await rig.open("sess-deaf");
    await opened(fake);
    const turn = rig.run(fake, "deaf");
    await fake.ups.find((m) => m.t === "delta" && m.turn === turn);
    const pid = rig.host.pool.processes("ref")[0]!.pid;
    const killed = rig.logs.find((l) => l.msg === "harness did not end an interrupted turn; killing it", 20_000);
    fake.send({ t: "interrupt", turn });
    // The session is resumed meanwhile (a newer lease, as after `resume` and a message): this lease leaves.
    const next = await rig.open("sess-deaf", {}, undefined, 2);
    expect((await killed).fields.pid).toBe(pid);
    await opened(next);
    expect(rig.host.pool.processes("ref").map((p) => p.pid)).not.toContain(pid);
    const after = rig.run(next, "after");
    expect((await turnEnd(next, after)).status).toBe("completed");
  }, 30_000);

  it("a harness that writes fatal mid-turn and stays is ended: the turn fails with its message, the next session opens in a new process", async () => {
    // Says it is about to exit, then ignores SIGTERM and EOF alike: only the runner-host can end it.
    const stuck = inlineHarness(
      "stuck",
      `if (cmd.text === "die") out({ type: "fatal", message: "cannot go on" });
       else out({ type: "turn.end", session: cmd.session, turn: cmd.turn, status: "completed" });`,
    );
    rig = await Rig.start({ harness: { command: [...stuck.slice(0, 2), `process.on("SIGTERM",()=>{});setInterval(()=>{},1000);${stuck[2]}`] } });
    const fake = await rig.open("sess-fatal");
    await opened(fake);
    const pid = rig.host.pool.processes("ref")[0]!.pid;
    const turn = rig.run(fake, "die");
    await rig.logs.find((l) => l.msg === "harness fatal", 5_000);
    // Opened while the stuck process is still there: not into it.
    const other = await rig.open("sess-after-fatal");
    await opened(other);
    const end = await turnEnd(fake, turn);
    expect(end).toMatchObject({ status: "failed", error: { code: "service_error", message: "the harness process failed: cannot go on" } });
    expect(rig.host.pool.processes("ref").map((p) => p.pid)).not.toContain(pid);
    expect((await turnEnd(other, rig.run(other, "fine"))).status).toBe("completed");
    await rig.stop();
    rig = undefined;
    expect(alive(pid)).toBe(false);
  }, 20_000);

  it("fails the running turn with service_error when the harness process is killed, and detaches the session", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-kill");
    await opened(fake);
    const turn = rig.run(fake, "[[hang]]");
    await rig.provider.waitForRequests(1);
    const proc = rig.host.pool.processes("ref")[0]!;
    process.kill(proc.pid, "SIGKILL");
    const end = await turnEnd(fake, turn);
    expect(end).toMatchObject({ status: "failed", error: { code: "service_error" } });
    expect(end.error!.message).toMatch(/harness process crashed \(signal SIGKILL\)/);
    expect(await fake.ups.find((m) => m.t === "detached")).toMatchObject({ reason: "the harness process exited" });
    const closed = await fake.sockets.find((s) => !s.open);
    expect(closed.code).toBe(1000);
    expect(rig.host.session("sess-kill")).toBeUndefined();
  });

  it("recycles an idle process when the provider key changes: a new pid, the new key on the wire", async () => {
    rig = await Rig.start();
    const fake = await rig.open("sess-key");
    await opened(fake);
    const t1 = rig.run(fake, "one");
    await turnEnd(fake, t1);
    const before = rig.host.pool.processes("ref")[0]!;
    expect(rig.provider.requests.at(-1)!.headers.authorization).toBe("Bearer test-key-1");

    const t2 = rig.run(fake, "two", { provider: rig.grant("test-key-2") });
    expect((await turnEnd(fake, t2)).status).toBe("completed");
    const after = rig.host.pool.processes("ref").filter((p) => p.state === "ready");
    expect(after).toHaveLength(1);
    expect(after[0]!.pid).not.toBe(before.pid);
    await before.hp!.exited;
    expect(alive(before.pid)).toBe(false);
    const last = rig.provider.requests.at(-1)!;
    expect(last.headers.authorization).toBe("Bearer test-key-2");
    // Re-opened from the cached native state: the new process saw the first turn.
    expect(last.body.messages.map((m: { role: string }) => m.role)).toEqual(["system", "user", "assistant", "user"]);
  });

  it("moves a session to a process with the new key when its own process is busy", async () => {
    rig = await Rig.start({ harness: { max_active_turns: 2 } });
    const a = await rig.open("sess-busy");
    const b = await rig.open("sess-move");
    await Promise.all([opened(a), opened(b)]);
    const ta = rig.run(a, `[[tool ${SLOW.name} {}]]`);
    const held = await rig.tools.calls.next((c) => c.path === "/slow");
    const old = rig.host.pool.processes("ref")[0]!;

    const tb = rig.run(b, "with the new key", { provider: rig.grant("test-key-2") });
    expect((await turnEnd(b, tb)).status).toBe("completed");
    expect(rig.provider.requests.at(-1)!.headers.authorization).toBe("Bearer test-key-2");
    const moved = rig.host.pool.residentIn(rig.host.session("sess-move")!)!;
    expect(moved.pid).not.toBe(old.pid);
    expect(rig.host.pool.residentIn(rig.host.session("sess-busy")!)).toBe(old); // the running turn was not disturbed

    held.res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ content: [{ type: "text", text: "ok" }] }));
    expect((await turnEnd(a, ta)).status).toBe("completed");
    expect(rig.provider.requests.at(-1)!.headers.authorization).toBe("Bearer test-key-1");
  });

  it("fails the turn with service_error when the harness breaks stdio framing", async () => {
    rig = await Rig.start({ harness: { command: GARBLING_HARNESS } });
    const fake = await rig.open("sess-garble");
    await opened(fake);
    const turn = rig.run(fake, "anything");
    const end = await turnEnd(fake, turn);
    expect(end).toMatchObject({ status: "failed", error: { code: "service_error" } });
    expect(end.error!.message).toMatch(/harness process broke stdio framing/);
    expect(await fake.ups.find((m) => m.t === "detached")).toMatchObject({ reason: "the harness process exited" });
  });
});

describe("runner-host turns with a harness of another author", () => {
  it("never lets a harness's echo of a provider key reach the object: deltas, assistant text, tool arguments, its own tool results", async () => {
    rig = await Rig.start({ harness: { command: ECHOING_HARNESS } });
    // Another provider's key, handed to another session of this runner-host: a process shared with
    // that session (or a spare started with every key seen) holds it too.
    const other = await rig.open("sess-other", { provider: { ...rig.grant(OTHER_KEY), prefix: "anthropic" } });
    await opened(other);
    const fake = await rig.open("sess-echo");
    await opened(fake);
    const turn = rig.run(fake, "echo");
    expect(await turnEnd(fake, turn)).toMatchObject({ status: "completed" });
    const sent = JSON.stringify(fake.turn(turn));
    expect(sent).not.toContain("test-key-1");
    expect(sent).not.toContain(OTHER_KEY);
    const events = fake.turn(turn);
    expect(events.filter((m) => m.t === "delta").map((m) => (m.t === "delta" ? m.text : "")).join("")).toBe("key [redacted] [redacted]");
    expect(events.find((m) => m.t === "assistant")).toMatchObject({ text: "key [redacted] [redacted]" });
    expect(events.find((m) => m.t === "tool_call")).toMatchObject({ call: { name: "lookup", arguments: { k: "[redacted] [redacted]" } } });
    expect(events.find((m) => m.t === "tool_result")).toMatchObject({ result: { content: [{ type: "text", text: "[redacted] [redacted]" }] } });
  });

  it("records a result the harness answers itself that breaks a Result's rules (unknown_outcome without is_error, an image not base64) as an error result saying why", async () => {
    const [node, e, script] = inlineHarness("self-answer", `
      const ev = (m) => out({ session: cmd.session, turn: cmd.turn, ...m });
      const bad = cmd.text === "image" ? { content: [{ type: "image", data: "@@", mime_type: "image/png" }] } : { content: [], unknown_outcome: true };
      ev({ type: "tool.call", call: { id: "c1", name: "lookup", arguments: {} }, answered: true });
      ev({ type: "tool.result", call_id: "c1", result: bad });
      ev({ type: "turn.end", status: "completed" });`);
    rig = await Rig.start({ harness: { command: [node!, e!, script!] } });
    const fake = await rig.open("sess-self");
    await opened(fake);
    for (const [text, problem] of [
      ["image", "content[0].data: not base64"],
      ["outcome", "unknown_outcome is for an error result (is_error true)"],
    ]) {
      const turn = rig.run(fake, text!);
      expect(await turnEnd(fake, turn)).toMatchObject({ status: "completed" });
      expect(fake.turn(turn).find((m) => m.t === "tool_result")).toMatchObject({
        result: { is_error: true, content: [{ type: "text", text: `the harness answered the call with an invalid result: ${problem}` }] },
      });
    }
  });

  it("answers a call of a tool the session does not have, not marked answered, with an error result; the turn goes on", async () => {
    rig = await Rig.start({ harness: { command: ASKING_HARNESS } });
    const fake = await rig.open("sess-ask");
    await opened(fake);
    const turn = rig.run(fake, "ask");
    expect(await turnEnd(fake, turn)).toMatchObject({ status: "completed" });
    const events = fake.turn(turn);
    expect(events.find((m) => m.t === "tool_call")).toMatchObject({ call: { name: "no_such_tool" }, dispatched: false });
    expect(events.find((m) => m.t === "tool_result")).toMatchObject({ result: { is_error: true, content: [{ type: "text", text: 'the session has no tool "no_such_tool"' }] } });
    // The harness got the same result (it ended the turn with the text it read).
    expect(events.find((m) => m.t === "assistant")).toMatchObject({ text: 'got: the session has no tool "no_such_tool"' });
  });

  it("a harness that resolves another model at open fails the open, naming both: no other model is ever used", async () => {
    const [node, e, script] = inlineHarness("fallback", `out({ type: "turn.end", session: cmd.session, turn: cmd.turn, status: "completed" });`);
    const fallback = script!.replace('id: "gpt-4o-mini", api', 'id: "gpt-4o", api');
    expect(fallback).not.toBe(script);
    rig = await Rig.start({ harness: { command: [node!, e!, fallback] } });
    const fake = await rig.open("sess-fallback");
    expect(await fake.ups.next((m) => m.t === "opened" || m.t === "open_failed")).toMatchObject({
      t: "open_failed",
      message: "the harness resolved model openai/gpt-4o instead of openai/gpt-4o-mini",
    });
  });

  it("a native record the harness could not be sent back in one line fails its turn and is not kept; one that just fits is", async () => {
    // The record's state_part line (one record, with the runner-host's id allowance of 48 bytes) is
    // exactly the harness's max_line_bytes (1 MiB) for "fit", one byte more for "over".
    const [node, e, script] = inlineHarness(
      "records",
      `const env = JSON.stringify({ op: "state_part", session: cmd.session, records: [] }).length + 48;
       const pad = "x".repeat((1 << 20) - env - JSON.stringify({ role: "user", pad: "" }).length + (cmd.text === "over" ? 1 : 0));
       out({ type: "state.append", session: cmd.session, turn: cmd.turn, records: [{ role: "user", pad }] });
       out({ type: "turn.end", session: cmd.session, turn: cmd.turn, status: "completed" });`,
    );
    rig = await Rig.start({ harness: { command: [node!, e!, script!] } });
    const fake = await rig.open("sess-records");
    await opened(fake);
    const fit = rig.run(fake, "fit");
    expect(await turnEnd(fake, fit)).toMatchObject({ status: "completed" });
    expect(turnWindow(fake, fit).filter((m) => m.t === "native")).toHaveLength(1);
    const over = rig.run(fake, "over");
    expect(await turnEnd(fake, over)).toMatchObject({
      status: "failed",
      error: { code: "service_error", message: `the harness wrote a native state record that needs a ${(1 << 20) + 1}-byte line to be sent back, over its line limit (${1 << 20} bytes)` },
    });
    expect(turnWindow(fake, over).filter((m) => m.t === "native")).toEqual([]);
  });

  it("tool arguments nesting exactly 64 levels reach the tool; one level more gets an error result, the tool sees nothing, the turn goes on", async () => {
    rig = await Rig.start({ harness: { command: DEEP_ASKING_HARNESS } });
    const fake = await rig.open("sess-deep-args");
    await opened(fake);
    const fits = rig.run(fake, "64");
    expect(await turnEnd(fake, fits)).toMatchObject({ status: "completed" });
    expect(fake.turn(fits).find((m) => m.t === "tool_call")).toMatchObject({ dispatched: true });
    expect(rig.tools.calls.items).toHaveLength(1);
    const deep = rig.run(fake, "65");
    expect(await turnEnd(fake, deep)).toMatchObject({ status: "completed" });
    expect(fake.turn(deep).find((m) => m.t === "tool_call")).toMatchObject({ call: { name: "get_weather" }, dispatched: false });
    const text = 'invalid arguments for tool "get_weather": the arguments nest deeper than 64 levels';
    expect(fake.turn(deep).find((m) => m.t === "tool_result")).toMatchObject({ result: { is_error: true, content: [{ type: "text", text }] } });
    expect(fake.turn(deep).find((m) => m.t === "assistant")).toMatchObject({ text: `got: ${text}` });
    expect(rig.tools.calls.items).toHaveLength(1);
  });

  it("a native record nesting 126 levels fails its turn and is not kept (no open line could carry it back); one of 125 is kept and opens in the reference harness", async () => {
    // The record's own object is level 1; `{"role":"user","d":{"a":…}}`.
    const record = (levels: number) => {
      let d: unknown = 1;
      for (let i = 0; i < levels - 1; i++) d = { a: d };
      return { role: "user", content: "deep", timestamp: 1, d };
    };
    const [node, e, script] = inlineHarness(
      "deep-records",
      `let d = 1; for (let i = 0; i < Number(cmd.text) - 1; i++) d = { a: d };
       out({ type: "state.append", session: cmd.session, turn: cmd.turn, records: [{ role: "user", content: "deep", timestamp: 1, d }] });
       out({ type: "turn.end", session: cmd.session, turn: cmd.turn, status: "completed" });`,
    );
    rig = await Rig.start({ harness: { command: [node!, e!, script!] } });
    const fake = await rig.open("sess-deep-records");
    await opened(fake);
    const kept = rig.run(fake, "125");
    expect(await turnEnd(fake, kept)).toMatchObject({ status: "completed" });
    expect(turnWindow(fake, kept).filter((m) => m.t === "native")).toMatchObject([{ t: "native", records: [record(125)] }]);
    const deep = rig.run(fake, "126");
    expect(await turnEnd(fake, deep)).toMatchObject({
      status: "failed",
      error: { code: "service_error", message: "the harness wrote a native state record nesting deeper than 125 levels, which no line can send back (128 levels)" },
    });
    expect(turnWindow(fake, deep).filter((m) => m.t === "native")).toEqual([]);
    await rig.stop();
    // The kept record goes back inside an `open`, at that line's deepest level: the reference harness takes it.
    rig = await Rig.start();
    const reopened = await rig.open("sess-deep-records", {}, [record(125)]);
    await opened(reopened);
  });

  it("a command answered after its timeout leaves nothing running unread: a late open is detached, a late run interrupted", async () => {
    // Takes commands concurrently: it accepts an open with instructions "late", and every run, 300
    // ms late, and only then has the session open or the turn running; says on stderr what an
    // interrupt or a detach found.
    const late = commandHarness(
      "late",
      `globalThis.open ??= new Set(); globalThis.running ??= new Set();
       if (cmd.op === "interrupt" || cmd.op === "detach") process.stderr.write("got " + cmd.op + ((cmd.op === "interrupt" ? running : open).has(cmd.session) ? " (live)" : " (none)") + "\\n");
       if (cmd.op === "init") ok({ engine: "e", catalog: "c" });
       else if (cmd.op === "open") setTimeout(() => { open.add(cmd.session); ok(${OPENED}); }, cmd.instructions === "late" ? 300 : 0);
       else if (cmd.op === "run") setTimeout(() => { running.add(cmd.session); ok({}); }, 300);
       else if (cmd.op === "detach") { open.delete(cmd.session); ok({}); }
       else if (cmd.op === "interrupt") { running.delete(cmd.session); ok({}); }
       else if (cmd.op === "ping") ok({ sessions: 1, running: 0 });
       else ok({});`,
    );
    rig = await Rig.start({ harness: { command: late }, host: { harnessRequestTimeoutMs: 100 } });
    const stderr = (line: string) => rig!.logs.next((l) => l.msg === "harness stderr" && l.fields.line === line);
    // Opened first, it keeps the process running past the other session's failed open.
    const fake = await rig.open("sess-late-run");
    await opened(fake);
    const lateOpen = await rig.open("sess-late-open", { instructions: "late" });
    expect(await lateOpen.ups.next((m) => m.t === "opened" || m.t === "open_failed")).toMatchObject({
      t: "open_failed",
      message: "the harness did not answer: open got no response within 100 ms",
    });
    await stderr("got detach (live)");

    const turn = rig.run(fake, "hello");
    expect(await turnEnd(fake, turn)).toMatchObject({ status: "failed", error: { code: "service_error", message: "the harness did not take the turn: run got no response within 100 ms" } });
    await stderr("got interrupt (live)");
  });

  it("takes turn.end interrupted without an error as an interruption (conflict), not a failure", async () => {
    rig = await Rig.start({ harness: { command: inlineHarness("bare-interrupt", `out({ type: "turn.end", session: cmd.session, turn: cmd.turn, status: "interrupted" });`) } });
    const fake = await rig.open("sess-bare");
    await opened(fake);
    const turn = rig.run(fake, "stop");
    expect(await turnEnd(fake, turn)).toMatchObject({ status: "interrupted", error: { code: "conflict", message: "the turn was interrupted" } });
  });
});

const OTHER_KEY = "sk-other-provider-key-42";
const USAGE = "{ input_tokens: 1, output_tokens: 1, cache_read_tokens: 0, cache_write_tokens: 0, total_tokens: 2 }";
const MESSAGE = (text: string) => `out({ type: "assistant.message", session: cmd.session, turn: cmd.turn, text: ${text}, usage: ${USAGE}, stop_reason: "stop", model: { provider: "openai", id: "gpt-4o-mini" } });`;

/**
 * A harness that keeps the key `init` gave it and echoes it everywhere a turn writes: a delta, the
 * assistant text, the arguments of a tool call it answers itself, and that call's result.
 */
const ECHOING_HARNESS = (() => {
  const [node, e, script] = inlineHarness("echoer", `
    const key = globalThis.key + " ${OTHER_KEY}";
    const ev = (m) => out({ session: cmd.session, turn: cmd.turn, ...m });
    ev({ type: "assistant.delta", text: "key " + key });
    ${MESSAGE('"key " + key')}
    ev({ type: "tool.call", call: { id: "c1", name: "lookup", arguments: { k: key } }, answered: true });
    ev({ type: "tool.result", call_id: "c1", result: { content: [{ type: "text", text: key }], is_error: false } });
    ev({ type: "turn.end", status: "completed" });`);
  return [node!, e!, script!.replace(`if (cmd.op === "init")`, `if (cmd.op === "init") globalThis.key = cmd.providers.openai?.key; if (cmd.op === "init")`)];
})();

/** A harness that hands over a call of a tool the session lacks and ends the turn with the result it gets. */
const ASKING_HARNESS = askingHarness("asker", `{ id: "c1", name: "no_such_tool", arguments: {} }`);

/** Like the above, calling get_weather with arguments nesting as many levels as the run's text says. */
const DEEP_ASKING_HARNESS = askingHarness(
  "deep-asker",
  `{ id: "c1", name: "get_weather", arguments: { city: "Paris", d } }`,
  `let d = 1; for (let i = 0; i < Number(cmd.text) - 1; i++) d = { a: d };`,
);

/** Makes one tool call (`call`, after `prelude`) per run, and ends the turn saying what the result read. */
function askingHarness(engine: string, call: string, prelude = ""): string[] {
  const [node, e, script] = inlineHarness(engine, `
    globalThis.turn = cmd;
    ${prelude}
    out({ type: "tool.call", session: cmd.session, turn: cmd.turn, call: ${call} });`);
  const onResult = `if (cmd.op === "tool_result") { const t = globalThis.turn; out({ type: "response", id: cmd.id, ok: true, result: {} }); const cmd0 = cmd; { const cmd = t; ${MESSAGE('"got: " + cmd0.result.content[0].text')} out({ type: "turn.end", session: t.session, turn: t.turn, status: "completed" }); } }`;
  return [node!, e!, script!.replace(`else if (cmd.op === "run")`, `else ${onResult} else if (cmd.op === "run")`)];
}

/** Everything the object got for one turn, `native` (which names no turn) included. */
function turnWindow(fake: import("./runner-fake-service.ts").FakeSession, turn: string): LinkUp[] {
  const items = fake.ups.items;
  const end = items.findIndex((m) => m.t === "turn_end" && m.turn === turn);
  let start = end;
  while (start > 0 && !["turn_end", "opened"].includes(items[start - 1]!.t)) start--;
  return items.slice(start, end + 1);
}

/**
 * A harness that says ready, accepts init and open, and answers `run` with a line that is not
 * JSON: a stdio framing violation mid-turn.
 */
const GARBLING_HARNESS = inlineHarness("garbler", `process.stdout.write("not json\\n");`);

function firstDeltaMs(fake: import("./runner-fake-service.ts").FakeSession, turn: string, since: number): number {
  const at = fake.deltaTimes.get(turn);
  if (at === undefined) throw new Error("no delta");
  return at - since;
}
