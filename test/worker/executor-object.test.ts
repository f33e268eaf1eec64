/**
 * ExecutorObject in workerd: what it stores (a token digest, never the token), that an idle
 * connected executor arms nothing, that a pending call arms the sweep and that the sweep ends a
 * call whose connection vanished without a close event (an object restart), and that the SSE
 * relay frames commands without `id:`, and that an id nobody registered answers 404 and stays an
 * empty object.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { Dispatched, ExecutorCredential } from "../../src/shared/executor-protocol.ts";
import type { Result } from "../../src/shared/errors.ts";
import { newId } from "../../src/shared/ids.ts";
import { api, createBody, env, expectApiError, sseReader } from "./helpers.ts";

const TOOL = { name: "lookup", description: "d", input_schema: { type: "object" } };

async function register(): Promise<ExecutorCredential> {
  const res = await api("/executors", { method: "POST", body: JSON.stringify({ binding: "dict", tools: [TOOL] }) });
  expect(res.status).toBe(201);
  return (await res.json()) as ExecutorCredential;
}

const dispatch = (id: string, callId: string, args: Record<string, unknown> = {}, credential?: string) =>
  env.EXECUTORS.getByName(id).dispatch({
    call_id: callId,
    tool: "lookup",
    arguments: args,
    ...(credential !== undefined ? { credential } : {}),
    scope: { tenant_id: "acme", session_id: "b".repeat(32), call_id: callId },
    session: `${"b".repeat(32)}:acme`,
  }) as unknown as Promise<Result<Dispatched>>;

describe("ExecutorObject", () => {
  it("stores the token's digest only, and costs nothing while connected and idle", async () => {
    const cred = await register();
    const res = await api(`/executors/${cred.id}/commands`, { token: cred.token });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const frames = sseReader(res.body!);
    const ready = (await frames.next("ready"))!;
    expect(ready.lines[0]).toBe("event: ready");
    expect(ready.id).toBeUndefined();
    const stub = env.EXECUTORS.getByName(cred.id);
    const seen = await runInDurableObject(stub, async (_, state) => ({
      alarm: await state.storage.getAlarm(),
      rows: state.storage.sql.exec("SELECT * FROM executor").toArray(),
      sockets: state.getWebSockets().length,
    }));
    expect(seen.alarm).toBeNull();
    expect(seen.sockets).toBe(1);
    expect(JSON.stringify(seen.rows)).not.toContain(cred.token);
    frames.cancel();
  });

  it("a pending call arms the sweep; a connection gone without a close event ends it as lost at the sweep", async () => {
    const cred = await register();
    const res = await api(`/executors/${cred.id}/commands`, { token: cred.token });
    const frames = sseReader(res.body!);
    await frames.next("ready");
    const callId = "c".repeat(32);
    expect(await dispatch(cred.id, callId)).toEqual({ ok: true, value: {} });
    const call = (await frames.next("call"))!;
    expect(call.event).toBe("call");
    expect(call.id).toBeUndefined();
    expect(JSON.parse(call.data!)).toMatchObject({ type: "call", call_id: callId, tool: "lookup" });
    const stub = env.EXECUTORS.getByName(cred.id);
    expect(await runInDurableObject(stub, (_, state) => state.storage.getAlarm())).not.toBeNull();
    // As after a restart: the socket is gone, and no close event was delivered for it.
    await runInDurableObject(stub, (_, state) => {
      for (const ws of state.getWebSockets()) ws.serializeAttachment({ connection: "0".repeat(32), kind: "sse" });
    });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const after = await runInDurableObject(stub, async (_, state) => ({
      pending: state.storage.sql.exec("SELECT * FROM pending").toArray(),
      alarm: await state.storage.getAlarm(),
    }));
    // The lost call's result went to its session (which no longer waits for it) and the row is gone.
    expect(after).toEqual({ pending: [], alarm: null });
    frames.cancel();
  });

  it("a $credential the model sent never reaches the executor: dropped without an override, replaced with one", async () => {
    const cred = await register();
    const frames = sseReader((await api(`/executors/${cred.id}/commands`, { token: cred.token })).body!);
    await frames.next("ready");
    const forged = { q: "x", $credential: "MODEL-FORGED" };
    expect(await dispatch(cred.id, "1".repeat(32), forged)).toEqual({ ok: true, value: {} });
    expect(JSON.parse((await frames.next("the call without an override"))!.data!).arguments).toEqual({ q: "x" });
    expect(await dispatch(cred.id, "2".repeat(32), forged, "the-override")).toEqual({ ok: true, value: {} });
    expect(JSON.parse((await frames.next("the call with an override"))!.data!).arguments).toEqual({ q: "x", $credential: "the-override" });
    frames.cancel();
  });

  it("refuses at registration a tool schema that would fail, or check nothing, on every call (as host tools are at -check)", async () => {
    const bad: [string, Record<string, unknown>][] = [
      ["input_schema.properties.x.pattern", { type: "object", properties: { x: { type: "string", pattern: "(" } } }],
      ["input_schema", { type: "object", $ref: "#/$defs/nope" }],
      ["input_schema.properties", { type: "object", properties: 5 }],
      ["input_schema.required", { type: "object", required: "a" }],
      ["input_schema.properties.x.type", { type: "object", properties: { x: { type: "text" } } }],
      ["input_schema.$ref", { type: "object", $ref: "https://example.com/x.json" }],
    ];
    for (const [where, input_schema] of bad) {
      const res = await api("/executors", { method: "POST", body: JSON.stringify({ binding: "dict", tools: [{ ...TOOL, input_schema }] }) });
      const body = (await res.clone().json()) as { error: { message: string } };
      await expectApiError(res, 400, "invalid_request");
      expect(body.error.message, where).toContain(`tools[0].${where}`);
    }
    const output = await api("/executors", {
      method: "POST",
      body: JSON.stringify({ binding: "dict", tools: [{ ...TOOL, output_schema: { type: "object", properties: { y: { pattern: "[" } } } }] }),
    });
    await expectApiError(output, 400, "invalid_request");
    const fine = { type: "object", properties: { x: { type: "string", pattern: "^[a-z]+$" }, y: { $ref: "#/$defs/y" } }, $defs: { y: { type: "integer" } } };
    const ok = await api("/executors", { method: "POST", body: JSON.stringify({ binding: "dict", tools: [{ ...TOOL, input_schema: fine }] }) });
    expect(ok.status).toBe(201);
  });

  it("a call to an executor with no connection ends at once as unavailable, without unknown_outcome", async () => {
    const cred = await register();
    const r = await dispatch(cred.id, "d".repeat(32));
    expect(r.ok && r.value.result).toMatchObject({ is_error: true });
    expect(r.ok && r.value.result?.unknown_outcome).toBeUndefined();
  });

  it("a binding naming the executor id in upper case is accepted and reported lowercase", async () => {
    const cred = await register();
    const res = await api("/sessions", {
      method: "POST",
      body: JSON.stringify(createBody({ config: { model: "openai/gpt-test", tools: [], bindings: [{ alias: "dict", executor: cred.id.toUpperCase() }] } })),
    });
    expect(res.status).toBe(201);
    const s = (await res.json()) as { id: string; config: { bindings: { executor: string }[] } };
    expect(s.config.bindings[0]!.executor).toBe(cred.id);
    const got = (await (await api(`/sessions/${s.id}`)).json()) as typeof s;
    expect(got.config.bindings[0]!.executor).toBe(cred.id);
  });

  it("an executor id never registered is not found everywhere and leaves its object empty", async () => {
    const id = newId();
    const cred = { token: "x".repeat(40) };
    await expectApiError(await api(`/executors/${id}/commands`, { token: cred.token }), 404, "not_found");
    await expectApiError(await api(`/executors/${id}/responses`, { method: "POST", token: cred.token, body: "{}" }), 404, "not_found");
    await expectApiError(await api(`/executors/${id}/close`, { method: "POST", token: cred.token, body: "{}" }), 404, "not_found");
    const bound = await api("/sessions", {
      method: "POST",
      body: JSON.stringify(createBody({ config: { model: "openai/gpt-test", tools: [], bindings: [{ alias: "dict", executor: id }] } })),
    });
    await expectApiError(bound, 400, "invalid_request");
    expect(await dispatch(id, "e".repeat(32))).toMatchObject({ ok: false, error: { code: "not_found" } });
    const stub = env.EXECUTORS.getByName(id);
    await stub.cancel("e".repeat(32));
    const tables = await runInDurableObject(stub, (_, state) =>
      state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\'").toArray(),
    );
    expect(tables).toEqual([]);
    // Registering under a fresh id still creates the tables it needs.
    const made = await register();
    expect(await env.EXECUTORS.getByName(made.id).info()).toMatchObject({ ok: true, value: { binding: "dict" } });
  });

  it("refuses an unknown executor (404) and a wrong token (401) before a body it cannot take (413)", async () => {
    const cred = await register();
    const big = JSON.stringify({ pad: "x".repeat(20_000) }); // over the test config's 1024 + 16384 byte cap
    for (const path of ["responses", "close"]) {
      await expectApiError(await api(`/executors/${"c".repeat(32)}/${path}`, { method: "POST", body: big, token: cred.token }), 404, "not_found");
      await expectApiError(await api(`/executors/${cred.id}/${path}`, { method: "POST", body: big, token: "" }), 401, "forbidden");
      await expectApiError(await api(`/executors/${cred.id}/${path}`, { method: "POST", body: big, token: cred.token }), 413, "invalid_request");
    }
  });
});
