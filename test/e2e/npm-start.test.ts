/**
 * The README's main command: `npm start` runs the local stack with examples/local.json beside the
 * scripted model server, and a real turn goes through it. The run uses the example's config as
 * shipped, except that it listens on a free port and keeps its data in a temporary directory
 * (`-config` given after `npm start --` replaces the example's), and its secrets file copied beside
 * that config, which the stack loads the way it loads examples/local.env. The scripted server's
 * port is the example's own (8791), so it must be free on the machine.
 */
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseEnv } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { SvcClient, type SessionEvent } from "../../client/index.ts";
import { spawnLogged, type Logged } from "../helpers/process.ts";
import { ROOT } from "../helpers/stack.ts";

let demo: Logged | undefined;
afterAll(async () => {
  // The whole group: npm, the demo process, workerd and the harness processes.
  try {
    if (demo?.child.pid) process.kill(-demo.child.pid, "SIGKILL");
  } catch {
    // ESRCH: the group is gone, as it should be.
  }
});

describe("npm start", () => {
  it("runs the example stack and its scripted model, serves a turn, and stops every process on Ctrl-C", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "svc-npm-start-"));
    const config = JSON.parse(readFileSync(path.join(ROOT, "examples/local.json"), "utf8"));
    const configPath = path.join(dir, "local.json");
    writeFileSync(configPath, JSON.stringify({ ...config, listen: "127.0.0.1:0", data_dir: path.join(dir, "data") }));
    copyFileSync(path.join(ROOT, "examples/local.env"), path.join(dir, "local.env"));
    const token = parseEnv(readFileSync(path.join(dir, "local.env"), "utf8")).SVC_DEMO_TOKEN!;
    demo = spawnLogged("npm", ["start", "--", "-config", configPath], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: dir, WRANGLER_SEND_METRICS: "false" },
      detached: true,
    });
    await demo.waitFor(/scripted model server on http:\/\/127\.0\.0\.1:8791\/v1/, 60_000);
    const url = /listening on (http:\/\/\S+)/.exec(await demo.waitFor(/listening on http:\/\//, 120_000))![1]!;

    const svc = new SvcClient({ baseUrl: url, token });
    const s = await svc.createSession({ harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } });
    const events = svc.stream(s.id);
    const sent = await svc.sendMessage(s.id, "hello [[deltas 3]]");
    const seen: SessionEvent[] = [];
    for await (const e of events) {
      seen.push(e);
      if (e.type === "session.status" && e.input_id === sent.id && e.data.status !== "running") break;
    }
    expect(seen.at(-1)).toMatchObject({ type: "session.status", data: { status: "idle" } });
    expect(seen.find((e) => e.type === "assistant.message")).toMatchObject({ data: { text: "aaaabbbbcccc" } });

    // Ctrl-C in a terminal: SIGINT to the whole foreground group (npm, the demo, workerd, harnesses).
    process.kill(-demo.child.pid!, "SIGINT");
    await demo.waitFor(/"msg":"stopped"/, 30_000);
    await demo.exited;
    expect(() => process.kill(-demo!.child.pid!, 0), "a process of the group outlived Ctrl-C").toThrow(/ESRCH/);
  }, 180_000);
});
