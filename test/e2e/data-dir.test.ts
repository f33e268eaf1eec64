/**
 * `data_dir` is any local state directory (docs/configuration.md "Rules in detail"), and relative paths
 * resolve from the working directory. A data_dir outside the working directory (absolute, or
 * relative with `..`) works like one below it: the stack starts, a turn runs, state lands there.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect, it } from "vitest";
import { call } from "../helpers/api.ts";
import { openSse } from "../helpers/sse.ts";
import { ROOT, secret, startStack } from "../helpers/stack.ts";

const env = { MANAGE: secret("datadir-manage"), OPENAI_KEY: "sk-datadir" };
const config = {
  tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
  harnesses: { env: { command: ["node", `${ROOT}test/fixtures/env-harness.mjs`] } },
  providers: { openai: { api_key_env: "OPENAI_KEY" } },
};

it.each([
  ["an absolute data_dir outside the working directory", (dir: string) => path.join(dir, "srv", "svc", "data")],
  ["a relative data_dir that leaves the working directory", () => "../elsewhere/data"],
])("%s: the stack starts, runs a turn and keeps its state there", async (_name, dataDirOf) => {
  const dir = mkdtempSync(path.join(tmpdir(), "svc-datadir-"));
  const cwd = path.join(dir, "cwd");
  mkdirSync(cwd);
  const dataDir = dataDirOf(dir);
  const stack = await startStack({ config, env, dir, cwd, dataDir });
  try {
    const created = await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "env", config: { model: "openai/gpt-4o-mini", tools: [] } } });
    expect(created.status).toBe(201);
    const sse = await openSse(`${stack.url}/sessions/${created.body.id}/events`, { token: env.MANAGE });
    const sent = await call(stack.url, "POST", `/sessions/${created.body.id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "hi" } });
    expect(sent.status).toBe(202);
    await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle", 30_000);
    sse.close();
    const resolved = path.resolve(cwd, dataDir);
    expect(existsSync(path.join(resolved, "worker"))).toBe(true);
    expect(readdirSync(cwd)).toEqual([]); // nothing of the stack's state in the working directory
  } finally {
    await stack.stop();
  }
});
