/**
 * docs/api.md "Turns": an interrupt takes effect at once, and anything the runner-host still
 * reports for that turn is ignored; a resume goes back to the last completed checkpoint, so the
 * model does not see the stopped turn. The test plays the runner-host (link-helpers.ts) and sends
 * what a real one can still have in flight when the stop lands. And while a turn runs, the object
 * wakes on its own to look at its link (a restart of the service's process ends it silently).
 */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import type { Event } from "../../src/shared/api-schema.ts";
import { RUNNING_WATCH_MS } from "../../src/session/link-grace.ts";
import type { SessionObject } from "../../src/session/session-object.ts";
import { api, createBody, sendMessage, sessionStub } from "./helpers.ts";
import { closeLinks, link, openedLink, runnerHost } from "./link-helpers.ts";

afterEach(closeLinks);

const post = (path: string, body: unknown = {}) => api(path, { method: "POST", body: JSON.stringify(body) });
const events = async (id: string) => ((await (await api(`/sessions/${id}/events?limit=1000`)).json()) as { events: Event[] }).events;
const count = (id: string, table: string) =>
  runInDurableObject(sessionStub(id), (_, state) => state.storage.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`).one().n);

/** A new session with a message sent, and the attach order its runner-host got for it. */
async function attached(body = createBody()) {
  const control = await runnerHost();
  const res = await post("/sessions", body);
  expect(res.status).toBe(201);
  const id = ((await res.json()) as { id: string }).id;
  const input = await sendMessage(id, "go");
  const attach = await control.next((m) => m.t === "attach" && m.session?.startsWith(id) === true, "the attach order");
  return { id, input, lease: attach.lease!, control };
}

/** As `attached`, with its link opened and the turn's `run` taken. */
async function placed(body = createBody()) {
  const { id, input, lease } = await attached(body);
  const l = await openedLink(id, lease);
  l.send({ t: "ack", down: l.run.seq });
  return { id, input, l };
}

describe("what a runner-host reports after the turn was stopped", () => {
  it("a runtime tool call for a turn already interrupted is neither recorded nor handed to its executor", async () => {
    const tools = [{ name: "job", description: "a job", input_schema: { type: "object" } }];
    const reg = await post("/executors", { binding: "jobs", tools });
    expect(reg.status).toBe(201);
    const executor = ((await reg.json()) as { id: string }).id;
    const { id, input, l } = await placed(createBody({ config: { model: "openai/gpt-test", tools: [], bindings: [{ alias: "jobs", executor }] } }));
    expect((await post(`/sessions/${id}/events`, { type: "user.interrupt" })).status).toBe(202);
    await l.box.next((m) => m.t === "interrupt", "the interrupt on the link");
    // The model's call crossed the interrupt: the runner-host reports it as dispatched.
    l.send({ t: "tool_call", seq: 2, turn: input.id, call: { id: "c".repeat(32), name: "job", arguments: {} }, dispatched: true });
    await l.box.next((m) => m.t === "ack" && m.up === 2, "the ack of the late call");
    expect(await count(id, "runtime_calls")).toBe(0);
    expect((await events(id)).filter((e) => e.type === "tool.call" || e.type === "tool.result")).toEqual([]);
  });

  it("native records the released link still delivers after a resume are not kept: the next turn opens without the stopped prompt", async () => {
    const { id, l } = await placed();
    // The link socket as the object holds it, to deliver a message that was already on its way.
    let held: WebSocket | undefined;
    await runInDurableObject(sessionStub(id), (_, state) => {
      held = state.getWebSockets().find((ws) => (ws.deserializeAttachment() as { lease?: number } | null)?.lease !== undefined);
    });
    expect(held).toBeDefined();
    expect((await post(`/sessions/${id}/events`, { type: "user.interrupt" })).status).toBe(202);
    await l.box.next((m) => m.t === "interrupt", "the interrupt on the link");
    expect((await post(`/sessions/${id}/resume`)).status).toBe(200);
    const before = await count(id, "native");
    const delivered = await runInDurableObject(sessionStub(id), (obj: SessionObject) =>
      obj.webSocketMessage(held!, JSON.stringify({ t: "native", seq: 2, records: [{ role: "user", text: "go" }] })).then(
        () => "handled",
        (e: unknown) => String(e),
      ),
    );
    expect(await count(id, "native")).toBe(before);
    expect(delivered).toBe("handled");
  });
});

describe("while a turn runs", () => {
  it(`the object's alarm is due within RUNNING_WATCH_MS (${RUNNING_WATCH_MS} ms), and runs on while the turn does; after the turn, it is not re-armed`, async () => {
    const { id, input, l } = await placed();
    const stub = sessionStub(id);
    const alarm = () => runInDurableObject(stub, (_, state) => state.storage.getAlarm());
    const first = await alarm();
    expect(first).not.toBeNull();
    expect(first! - Date.now()).toBeLessThanOrEqual(RUNNING_WATCH_MS);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await alarm()).not.toBeNull();
    l.send({ t: "turn_end", seq: 2, turn: input.id, status: "completed" });
    await l.box.next((m) => m.t === "ack" && m.up === 2, "the ack of the turn's end");
    await runDurableObjectAlarm(stub);
    expect(await alarm()).toBeNull();
  });
});

describe("while a turn runs, also one placed anew", () => {
  it("a yielded turn that starts again (its status already running, no new event) arms the watch too", async () => {
    const { id, input, lease, control } = await attached();
    const first = await openedLink(id, lease);
    const stub = sessionStub(id);
    // As if the watch's alarm had run out while the turn waited to be placed again (a new instance:
    // the one running knows the alarm it set, and only its own alarm handler would tell it otherwise).
    await runInDurableObject(stub, (_, state) => state.storage.deleteAlarm());
    await evictDurableObject(stub);
    first.send({ t: "detached", seq: 2, reason: "dropped to make room (limits.loaded)", yielded: true });
    const again = await control.next((m) => m.t === "attach" && m.session?.startsWith(id) === true && m.lease! > lease, "a new placement");
    const second = await openedLink(id, again.lease!);
    expect(second.run.turn).toBe(input.id);
    const alarm = await runInDurableObject(stub, (_, state) => state.storage.getAlarm());
    expect(alarm).not.toBeNull();
    expect(alarm! - Date.now()).toBeLessThanOrEqual(RUNNING_WATCH_MS);
  });
});

describe("a link the object no longer needs", () => {
  it("a runner-host dialling a lease that is not current is refused with 409 before any socket (it takes that as the lease gone at once)", async () => {
    const s = await attached();
    expect((await post(`/sessions/${s.id}/close`)).status).toBe(202);
    const dialled = await sessionStub(s.id).fetch(`https://session/link?lease=${s.lease}`, { headers: { Upgrade: "websocket" } });
    expect([dialled.status, dialled.webSocket]).toEqual([409, null]);
  });

  it("an interrupt of a session whose open still waits on its runner-host lets the link go (detach), so it holds no limits.loaded slot", async () => {
    const s = await attached();
    const l = await link(s.id, s.lease);
    await l.box.next((m) => m.t === "ack", "the object's ack on accept");
    l.send({ t: "hello", down: 0 });
    await l.box.next((m) => m.t === "open", "open"); // the runner-host's open of the harness waits for room
    expect((await post(`/sessions/${s.id}/events`, { type: "user.interrupt" })).status).toBe(202);
    expect(await l.box.next((m) => m.t === "detach", "the detach")).toMatchObject({ t: "detach", reason: "nothing left to run" });
  });
});
