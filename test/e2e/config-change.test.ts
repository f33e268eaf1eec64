/**
 * An operator changes the host configuration between two starts on the same data_dir
 * (docs/configuration.md "Changing the configuration"): sessions whose harness or provider is gone
 * refuse new messages and fail what they held, and a session's upload state follows the storage
 * the configuration names now.
 */
import { mkdtempSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call, expectApiError } from "../helpers/api.ts";
import { allEvents, baseEnv, createSession, stackConfig, TOKEN, turn, uncursored } from "../helpers/persistence.ts";
import { openSse } from "../helpers/sse.ts";
import { REFERENCE_HARNESSES, scriptedProviders, startStack } from "../helpers/stack.ts";

let provider: ScriptedProvider;
beforeAll(async () => {
  provider = await startScriptedProvider();
});
afterAll(async () => {
  await provider?.close();
});

const model = (m: string) => ({ harness: "pi", config: { model: m, tools: [] } });

describe("a harness or provider removed from the configuration", () => {
  it("a message to a session that needs it is 422 unsupported naming it; input it already held fails, once, and the session is failed", async () => {
    const env = { ...baseEnv, OTHER_KEY: "sk-other" };
    const before = {
      tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
      harnesses: { pi: REFERENCE_HARNESSES.pi, pi2: REFERENCE_HARNESSES.pi },
      providers: { ...scriptedProviders(provider.url), other: { api_key_env: "OTHER_KEY", base_url: provider.url, api: "openai-completions" } },
    };
    // The Worker alone: an accepted message waits for a runner-host, and a crash leaves it queued.
    let stack = await startStack({ config: before, env, runner: false });
    const post = (p: string, body: unknown) => call(stack.url, "POST", p, { token: TOKEN, body });
    const kept = (await post("/sessions", model("openai/gpt-4o-mini"))).body.id as string;
    const noHarness = (await post("/sessions", { ...model("openai/gpt-4o-mini"), harness: "pi2" })).body.id as string;
    const noProvider = (await post("/sessions", model("other/m1"))).body.id as string;
    const held = (await post("/sessions", model("other/m1"))).body.id as string;
    const heldHarness = (await post("/sessions", { ...model("openai/gpt-4o-mini"), harness: "pi2" })).body.id as string;
    const waiting = await post(`/sessions/${held}/events`, { type: "user.message", text: "queued before the change", key: "k1" });
    expect(waiting.status).toBe(202);
    const waitingHarness = await post(`/sessions/${heldHarness}/events`, { type: "user.message", text: "queued before the change" });
    expect(waitingHarness.status).toBe(202);
    await stack.crash();

    const after = { ...before, harnesses: { pi: REFERENCE_HARNESSES.pi }, providers: scriptedProviders(provider.url) };
    stack = await startStack({ config: after, env, dir: stack.dir });
    try {
      // The message each held ran into the change: it fails with the cause, the session is failed.
      for (const [id, input, cause] of [
        [held, waiting.body.id, 'provider "other" of model "other/m1" is no longer configured'],
        [heldHarness, waitingHarness.body.id, 'harness "pi2" is no longer configured'],
      ] as const) {
        const sse = await openSse(`${stack.url}/sessions/${id}/events`, { token: TOKEN });
        await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "failed", 20_000);
        sse.close();
        const events = (await allEvents(stack.url, id)).map((e: any) => [e.type, e.data.code ?? e.data.status ?? e.data.text, e.input_id ?? null]);
        expect(events).toEqual([
          ["user.message", "queued before the change", null],
          ["session.status", "running", input],
          ["session.error", "service_error", input],
          ["session.status", "failed", null],
        ]);
        const error = (await allEvents(stack.url, id)).find((e) => e.type === "session.error") as any;
        expect(error.data.message).toBe(cause);
      }
      // Sent again with its key, the message is its original event, not a refusal.
      const again = await call(stack.url, "POST", `/sessions/${held}/events`, { token: TOKEN, body: { type: "user.message", text: "queued before the change", key: "k1" } });
      expect(again.status).toBe(202);
      expect(again.body.id).toBe(waiting.body.id);

      // A new message to a session that cannot run is refused, and nothing is recorded.
      const refused = async (id: string, message: string) => {
        const r = await call(stack.url, "POST", `/sessions/${id}/events`, { token: TOKEN, body: { type: "user.message", text: "hello" } });
        expectApiError(r, 422, "unsupported");
        expect(r.body.error.message).toBe(message);
        expect(await allEvents(stack.url, id)).toEqual([]);
      };
      await refused(noHarness, 'harness "pi2" is no longer configured: the session cannot run');
      await refused(noProvider, 'provider "other" of model "other/m1" is no longer configured: the session cannot run');

      // Sessions the change does not touch run as before.
      const sse = await openSse(`${stack.url}/sessions/${kept}/events`, { token: TOKEN });
      const m = await call(stack.url, "POST", `/sessions/${kept}/events`, { token: TOKEN, body: { type: "user.message", text: "still here" } });
      expect(m.status).toBe(202);
      await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === m.body.id, 20_000);
      sse.close();
      // The failed sessions were not placed over and over (each at most once, for the one open).
      for (const id of [held, heldHarness, noHarness, noProvider]) {
        expect(stack.stderr().split("\n").filter((l) => l.includes('"msg":"session attached"') && l.includes(id)).length).toBeLessThanOrEqual(1);
      }
    } finally {
      await stack.stop();
    }
  });
});

describe("a credential key removed", () => {
  it("calls of a session whose override it encrypted fail before they are sent, saying so; sessions under the kept key call as before", async () => {
    const seen: (string | undefined)[] = [];
    const tools = http.createServer((req, res) => {
      seen.push(req.headers.authorization);
      req.resume().on("end", () => res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ content: [{ type: "text", text: "found" }] })));
    });
    await new Promise<void>((r) => tools.listen(0, "127.0.0.1", r));
    const env = { ...baseEnv, TOOL_TOKEN: "tool-token-from-env", CK1: Buffer.alloc(32, 1).toString("base64"), CK2: Buffer.alloc(32, 2).toString("base64") };
    const config = (credential_keys: Record<string, unknown>) => ({
      ...stackConfig(provider, null),
      credential_keys,
      tools: [{ name: "search", description: "search", input_schema: { type: "object" }, url: `http://127.0.0.1:${(tools.address() as AddressInfo).port}/`, tenants: ["t"], token_env: "TOOL_TOKEN" }],
    });
    const withOverride = (value: string) => ({ harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [], bindings: [{ alias: "web", provider: "search" }] }, credentials: [{ binding: "web", value }] });
    const callTool = async (url: string, id: string) => {
      const sse = await openSse(`${url}/sessions/${id}/events`, { token: TOKEN });
      const sent = await call(url, "POST", `/sessions/${id}/events`, { token: TOKEN, body: { type: "user.message", text: "[[tool search {}]]" } });
      await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === sent.body.id, 20_000);
      sse.close();
      return sse.frames.find((f) => f.event === "tool.result")!.json.data.result;
    };
    let stack = await startStack({ config: config({ active: "k1", keys: { k1: "CK1" } }), env });
    const old = (await call(stack.url, "POST", "/sessions", { token: TOKEN, body: withOverride("under-k1") })).body.id as string;
    await stack.stop();
    stack = await startStack({ config: config({ active: "k2", keys: { k2: "CK2" } }), env, dir: stack.dir });
    try {
      const fresh = (await call(stack.url, "POST", "/sessions", { token: TOKEN, body: withOverride("under-k2") })).body.id as string;
      const before = seen.length;
      expect(await callTool(stack.url, old)).toEqual({ content: [{ type: "text", text: 'tool "search" could not use its credential override: its key was removed or changed' }], is_error: true });
      expect(seen.length).toBe(before); // never sent, not even with the tool's token_env
      await stack.waitForLog(/"msg":"credential override could not be decrypted".*credential key \\"k1\\" is not configured/, 10_000);
      expect(await callTool(stack.url, fresh)).toEqual({ content: [{ type: "text", text: "found" }] });
      expect(seen.at(-1)).toBe("Bearer under-k2");
    } finally {
      await stack.stop();
      await new Promise((r) => tools.close(r));
    }
  });
});

describe("persistence moved to another storage, or off and on again", () => {
  it("sync says pending until the storage now configured holds the whole session, which then loads from it", async () => {
    const root = mkdtempSync(path.join(tmpdir(), "svc-config-change-"));
    const first = { provider: "filesystem", directory: path.join(root, "first"), prefix: "svc", interval_seconds: 1 };
    const second = { ...first, directory: path.join(root, "second") };
    const dataDir = path.join(root, "data");
    const start = (persistence: Record<string, unknown> | null) => startStack({ config: stackConfig(provider, persistence), env: baseEnv, dir: root, dataDir });

    let stack = await start(first);
    const s = await createSession(stack.url);
    await turn(stack.url, s, "one");
    await turn(stack.url, s, "two");
    expect((await call(stack.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN })).body.pending).toBe(false);
    s.sse.close();
    await stack.stop();

    // Another directory: nothing of the session is there, whatever the first one holds.
    stack = await start(second);
    try {
      const sync = await call(stack.url, "GET", `/sessions/${s.id}/sync`, { token: TOKEN });
      expect(sync.body).toMatchObject({ pending: true, resume_offset: 0 });
      expect(sync.body.checkpoint).toBeUndefined();
      const flushed = await call(stack.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN });
      expect(flushed.body).toMatchObject({ pending: false, history_bytes: sync.body.history_bytes });
    } finally {
      await stack.stop();
    }

    // Persistence off for a turn, then on again: that turn is not in storage until uploaded.
    stack = await start(null);
    const sse = await openSse(`${stack.url}/sessions/${s.id}/events`, { token: TOKEN });
    const three = await turn(stack.url, { id: s.id, sse }, "three");
    sse.close();
    await stack.stop();
    stack = await start(second);
    let events;
    try {
      const sync = await call(stack.url, "GET", `/sessions/${s.id}/sync`, { token: TOKEN });
      expect(sync.body.pending).toBe(true);
      expect(sync.body.resume_offset).toBeLessThan(three.offset);
      // The read started its upload: a background round catches it up, with no flush.
      await stack.waitForLog(new RegExp(`"msg":"sync round","session_id":"${s.id}".*"done":true`), 20_000);
      expect((await call(stack.url, "GET", `/sessions/${s.id}/sync`, { token: TOKEN })).body).toMatchObject({ pending: false, resume_offset: three.offset, checkpoint: three.id });
      events = await allEvents(stack.url, s.id);
    } finally {
      await stack.stop();
    }

    // A deployment with an empty local state loads the whole session from the second directory.
    const fresh = await startStack({ config: stackConfig(provider, second), env: baseEnv });
    try {
      expect((await call(fresh.url, "GET", `/sessions/${s.id}`, { token: TOKEN })).status).toBe(200);
      expect(uncursored(await allEvents(fresh.url, s.id))).toEqual(uncursored(events));
    } finally {
      await fresh.stop();
    }
  });
});
