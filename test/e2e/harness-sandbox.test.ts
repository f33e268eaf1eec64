/**
 * Harness children hold nothing of the runner-host's: no descriptor beyond stdio (even one the
 * service itself inherited from whoever started it), and, when the service runs as root, not
 * root's identity but an unprivileged user of its own that owns its private directories: no two
 * processes (no two tenants) share a user, so neither can read the other's memory or files.
 */
import { chmodSync, closeSync, mkdtempSync, openSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect, it } from "vitest";
import { call } from "../helpers/api.ts";
import { openSse } from "../helpers/sse.ts";
import { ROOT, secret, startStack } from "../helpers/stack.ts";

const env = { MANAGE: secret("sandbox-manage"), OTHER: secret("sandbox-other"), OPENAI_KEY: "sk-sandbox" };
const root = process.getuid!() === 0;

/** One turn of the env harness in a new session of the token's tenant: what the harness reports. */
async function harnessOf(url: string, token: string) {
  const id = (await call(url, "POST", "/sessions", { token, body: { harness: "env", config: { model: "openai/gpt-4o-mini", tools: [] } } })).body.id;
  const sse = await openSse(`${url}/sessions/${id}/events`, { token });
  await call(url, "POST", `/sessions/${id}/events`, { token, body: { type: "user.message", text: "who are you" } });
  const reply = JSON.parse((await sse.waitFor((f) => f.event === "assistant.message", 30_000)).json.data.text);
  sse.close();
  return reply;
}

it("the env harness reports no inherited descriptor and, under a root service, an unprivileged uid", async () => {
  const marker = path.join(process.env.TMPDIR ?? "/tmp", `svc-leak-marker-${process.pid}`);
  writeFileSync(marker, "");
  // The stack inherits it as fd 200. (Node itself keeps low inherited descriptors from its
  // children; a high one, like the fd 251 a CI runner leaves open, reached harnesses.)
  const leaked = openSync(marker, "r");
  const stack = await startStack({
    config: {
      tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
      harnesses: { env: { command: ["node", `${ROOT}test/fixtures/env-harness.mjs`] } },
      providers: { openai: { api_key_env: "OPENAI_KEY" } },
    },
    env,
    inherit: { fd: leaked, at: 200 },
  });
  closeSync(leaked);
  try {
    const reply = await harnessOf(stack.url, env.MANAGE);

    // Descriptors 0-2 are its stdio pipes; whatever else it holds is Node's own, never the marker.
    expect(Object.values(reply.fds)).not.toContain(marker);
    for (const fd of ["0", "1", "2"]) expect(reply.fds[fd]).toMatch(/^(pipe|socket):/); // Node's stdio pipes are socket pairs
    if (root) {
      expect(reply.uid).toBeGreaterThanOrEqual(100_000);
      expect(reply.uid).toBeLessThanOrEqual(199_999);
      expect(reply.gid).toBe(reply.uid);
    } else {
      expect(reply.uid).toBe(process.getuid!());
      expect(reply.gid).toBe(process.getgid!());
    }
    if (root) expect(reply.groups).not.toContain(0);
    // Its private working and home directories belong to it.
    for (const dir of [reply.cwd, reply.env.HOME]) expect(statSync(dir).uid).toBe(reply.uid);
  } finally {
    await stack.stop();
  }
});

it("two tenants' harness processes run as two users: neither can enter the other's private directory, nor the data_dir", async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "svc-sandbox-data-"));
  chmodSync(dataDir, 0o755); // as an operator may have made it
  const stack = await startStack({
    config: {
      tokens: [
        { token_env: "MANAGE", tenant: "a", manage: true },
        { token_env: "OTHER", tenant: "b", manage: true },
      ],
      harnesses: { env: { command: ["node", `${ROOT}test/fixtures/env-harness.mjs`] } },
      providers: { openai: { api_key_env: "OPENAI_KEY" } },
    },
    env,
    dataDir,
  });
  try {
    const [a, b] = [await harnessOf(stack.url, env.MANAGE), await harnessOf(stack.url, env.OTHER)];
    // Where every session's conversation lives: its owner's alone, whoever the harnesses are.
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    if (!root) {
      // A runner-host that is not root runs every harness as itself (docs/configuration.md).
      expect([a.uid, b.uid]).toEqual([process.getuid!(), process.getuid!()]);
      return;
    }
    expect(a.uid).not.toBe(b.uid);
    for (const h of [a, b]) {
      const dir = statSync(path.dirname(h.cwd));
      expect(dir.uid).toBe(h.uid);
      expect(dir.mode & 0o777).toBe(0o700);
    }
  } finally {
    await stack.stop();
  }
});
