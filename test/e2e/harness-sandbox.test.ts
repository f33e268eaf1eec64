/**
 * Harness children hold nothing of the runner-host's: no descriptor beyond stdio (even one the
 * service itself inherited from whoever started it), and, when the service runs as root, not
 * root's identity but an unprivileged user that owns its private directories.
 */
import { closeSync, openSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { call } from "../helpers/api.ts";
import { openSse } from "../helpers/sse.ts";
import { ROOT, secret, startStack } from "../helpers/stack.ts";

const env = { MANAGE: secret("sandbox-manage"), OPENAI_KEY: "sk-sandbox" };

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
    const id = (await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "env", config: { model: "openai/gpt-4o-mini", tools: [] } } })).body.id;
    const sse = await openSse(`${stack.url}/sessions/${id}/events`, { token: env.MANAGE });
    await call(stack.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "who are you" } });
    const reply = JSON.parse((await sse.waitFor((f) => f.event === "assistant.message", 30_000)).json.data.text);
    sse.close();

    // Descriptors 0-2 are its stdio pipes; whatever else it holds is Node's own, never the marker.
    expect(Object.values(reply.fds)).not.toContain(marker);
    for (const fd of ["0", "1", "2"]) expect(reply.fds[fd]).toMatch(/^(pipe|socket):/); // Node's stdio pipes are socket pairs
    const root = process.getuid!() === 0;
    expect(reply.uid).toBe(root ? 65534 : process.getuid!());
    expect(reply.gid).toBe(root ? 65534 : process.getgid!());
    if (root) expect(reply.groups).not.toContain(0);
    // Its private working and home directories belong to it.
    for (const dir of [reply.cwd, reply.env.HOME]) expect(statSync(dir).uid).toBe(reply.uid);
  } finally {
    await stack.stop();
  }
});
