/**
 * Provider keys are never at rest: they travel from the Worker's variables to the runner-host when
 * a link message is sent and are never stored by a session object, also when messages are resent
 * after a dropped link. After turns, nothing under data_dir holds the key's bytes.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { newId } from "../../src/shared/ids.ts";
import { call } from "../helpers/api.ts";
import { openSse } from "../helpers/sse.ts";
import { secret, startStack, REFERENCE_HARNESSES, scriptedProviders } from "../helpers/stack.ts";

const KEY = `sk-at-rest-${newId()}`;
const env = { MANAGE: secret("keys-manage"), OPENAI_KEY: KEY };
let provider: ScriptedProvider;

beforeAll(async () => {
  provider = await startScriptedProvider();
});
afterAll(async () => {
  await provider?.close();
});

/** Every regular file under `dir`. */
function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true }).filter((d) => d.isFile()).map((d) => path.join(d.parentPath, d.name));
}

it("after turns, and messages resent after a dropped link, no file under data_dir holds the provider key", async () => {
  const stack = await startStack({
    config: {
      tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
      harnesses: REFERENCE_HARNESSES,
      providers: scriptedProviders(provider.url),
    },
    env,
  });
  const dataDir = path.join(stack.dir, "data");
  try {
    const id = (await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } })).body.id;
    const sse = await openSse(`${stack.url}/sessions/${id}/events`, { token: env.MANAGE });
    const first = (await call(stack.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "one" } })).body.id;
    await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === first, 30_000);
    // A queued second turn and a Worker restart (every socket drops) while it streams: the runner
    // link reconnects and the object resends what the runner-host had not acknowledged.
    const second = (await call(stack.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "[[deltas 40 size=2]] [[delay 40]]" } })).body.id;
    const third = (await call(stack.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "three" } })).body.id;
    await sse.waitFor((f) => f.event === "assistant.delta");
    const mark = stack.mark();
    stack.child.kill("SIGHUP");
    await stack.waitForLog(/"msg":"worker reloaded"/, 30_000, mark);
    const again = await openSse(`${stack.url}/sessions/${id}/events`, { token: env.MANAGE });
    await again.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === third, 30_000);
    expect(again.frames.some((f) => f.event === "session.error")).toBe(false);
    expect(again.frames.filter((f) => f.event === "assistant.message").length).toBe(3);
    expect(second).toBeDefined();
    // The key did reach the provider on every turn.
    expect(provider.requests.filter((r) => r.headers.authorization === `Bearer ${KEY}`).length).toBeGreaterThanOrEqual(3);
    again.close();
  } finally {
    await stack.stop();
  }
  const all = files(dataDir);
  expect(all.some((f) => f.endsWith(".sqlite"))).toBe(true);
  const needle = Buffer.from(KEY);
  expect(all.filter((f) => readFileSync(f).includes(needle))).toEqual([]);
});
