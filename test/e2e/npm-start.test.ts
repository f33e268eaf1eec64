/**
 * The README's main command: `npm start` runs the local stack with examples/local.json beside the
 * scripted model server, and a real turn goes through it. The run uses the example's config as
 * shipped, except that it listens on a free port and keeps its data in a temporary directory
 * (`-config` given after `npm start --` replaces the example's), and its secrets file copied beside
 * that config, which the stack loads the way it loads examples/local.env. The scripted server's
 * port is the example's own (8791), so it must be free on the machine.
 */
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseEnv } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { SvcClient, type SessionEvent } from "../../client/index.ts";
import { commandOf, processEnded, processTree, procStat, spawnLogged, type Logged } from "../helpers/process.ts";
import { openSse } from "../helpers/sse.ts";
import { ROOT } from "../helpers/stack.ts";

let demo: Logged | undefined;
afterAll(async () => {
  // The whole group: npm and the demo process (workerd dies with its parent; harnesses when their stdin closes).
  try {
    if (demo?.child.pid) process.kill(-demo.child.pid, "SIGKILL");
  } catch {
    // ESRCH: the group is gone, as it should be.
  }
});

/** Processes whose process group is `pgid` (from /proc). */
function groupMembers(pgid: number): number[] {
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => procStat(pid)?.pgrp === pgid); // a process gone meanwhile has no stat
}

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
      env: { PATH: process.env.PATH ?? "", HOME: dir, ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}), WRANGLER_SEND_METRICS: "false" },
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

    // Ctrl-C in a terminal, mid-turn with a stream open: SIGINT to the whole foreground group (npm
    // and the demo; workerd and the harnesses run in groups of their own). The stack drains as on
    // SIGTERM: the turn is interrupted, the stream gets its final events and is ended by the
    // service, not cut by workerd stopping first.
    const last = seen.at(-1)!;
    const stream = await openSse(`${url}/sessions/${s.id}/events?after=${encodeURIComponent("cursor" in last ? last.cursor : "")}`, { token });
    const hung = await svc.sendMessage(s.id, "[[hang]]");
    await stream.waitFor((f) => f.event === "session.status" && f.json.data.status === "running");
    const tree = processTree(demo.child.pid!);
    expect(tree.map(commandOf).filter((c) => c.includes("workerd"))).toHaveLength(1);
    const from = demo.mark();
    process.kill(-demo.child.pid!, "SIGINT");
    await stream.ended;
    expect(stream.frames.slice(-2).map((f) => [f.event, f.json.data.code ?? f.json.data.status, f.json.input_id])).toEqual([
      ["session.error", "conflict", hung.id],
      ["session.status", "interrupted", undefined],
    ]);
    expect(JSON.parse(await demo.waitFor(/"msg":"event streams ended"/, 30_000, from))).toMatchObject({ ended: 1, cut: 0 });
    await demo.waitFor(/"msg":"stopped"/, 30_000, from);
    await demo.exited;
    // Exited means gone or a zombie: an orphan is reaped by whoever adopted it, in its own time.
    expect(groupMembers(demo.child.pid!).filter((pid) => !processEnded(pid)).map(commandOf), "a process of the group outlived Ctrl-C").toEqual([]);
    expect(tree.filter((pid) => !processEnded(pid)).map(commandOf), "processes that outlived Ctrl-C").toEqual([]);
  }, 180_000);
});
