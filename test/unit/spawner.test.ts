/**
 * The process starter (runner-host/harness/spawner.ts): the runner-host's children are started by
 * a small helper process, which hands their pipes over, so a start's fork never holds the
 * runner-host's event loop.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { wrappedCommand } from "../../runner-host/harness/clean-spawn.ts";
import { Spawner, type SpawnedChild } from "../../runner-host/harness/spawner.ts";
import { REPO } from "./harness-helpers.ts";
import { processEnded as gone, procStat as stat } from "../helpers/process.ts";

function collect(child: SpawnedChild): { out: () => string; err: () => string } {
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (err += c));
  return { out: () => out, err: () => err };
}

/** Through the harness start wrapper, as a harness is started. */
function wrapped(argv: string[]): { file: string; args: string[] } {
  const [file, args] = wrappedCommand(argv, process.env.PATH);
  return { file, args };
}

describe("the process starter", () => {
  it("starts a child from its own small process, not from the runner-host, in a process group of its own; the starter is in its own group too", async () => {
    const spawner = new Spawner();
    const child = await spawner.spawn(wrapped(["/bin/sh", "-c", "read line; echo \"got $line\""]));
    const io = collect(child);
    const helper = stat(child.pid)!.ppid;
    expect(helper).not.toBe(process.pid);
    expect(stat(helper)).toMatchObject({ ppid: process.pid, pgrp: helper }); // a Ctrl-C to our group does not reach it
    expect(stat(child.pid)!.pgrp).toBe(child.pid);
    child.stdin.end("hello\n");
    const [code, signal] = await once(child, "close");
    expect({ code, signal, out: io.out() }).toEqual({ code: 0, signal: null, out: "got hello\n" });
  });

  it("hands over a child's pipes before it runs: what it writes at once, and its end, reach the runner-host even while the runner-host's loop is busy", async () => {
    const spawner = new Spawner();
    const started = spawner.spawn(wrapped(["/bin/sh", "-c", "printf 'at once'; printf 'to stderr' >&2; exit 3"]));
    // Hold this event loop as a busy runner-host would: no handle is acknowledged meanwhile.
    const until = Date.now() + 600;
    while (Date.now() < until);
    const child = await started;
    const io = collect(child);
    const [code, signal] = await once(child, "close");
    expect({ code, signal, out: io.out(), err: io.err() }).toEqual({ code: 3, signal: null, out: "at once", err: "to stderr" });
    expect(child.exitCode).toBe(3);
  });

  it("reports a child ended by a signal with the signal, and no exit code", async () => {
    const spawner = new Spawner();
    const child = await spawner.spawn(wrapped(["/bin/sh", "-c", "kill -TERM $$"]));
    collect(child);
    const [code, signal] = await once(child, "close");
    expect({ code, signal, exitCode: child.exitCode, signalCode: child.signalCode }).toEqual({ code: null, signal: "SIGTERM", exitCode: null, signalCode: "SIGTERM" });
  });

  it("fails a start that cannot happen with the reason", async () => {
    const spawner = new Spawner();
    const err = await spawner.spawn({ ...wrapped(["/bin/true"]), cwd: "/nonexistent-dir" }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/ENOENT/);
    const ran = await spawner.run({ file: "/bin/sh", args: ["-c", "exit 0"] }).then(() => "ended");
    expect(ran).toBe("ended");
  });

  it("when the starter itself ends, kills what it started, reports it ended by SIGKILL, and the next start brings a new starter", async () => {
    const spawner = new Spawner();
    const child = await spawner.spawn(wrapped(["/bin/sh", "-c", "sleep 60"]));
    collect(child);
    const helper = stat(child.pid)!.ppid;
    const logged: string[] = [];
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((line) => (logged.push(String(line)), true));
    process.kill(helper, "SIGKILL");
    const [code, signal] = await once(child, "exit").finally(() => spy.mockRestore());
    expect({ code, signal }).toEqual({ code: null, signal: "SIGKILL" });
    expect(logged.map((l) => JSON.parse(l))).toEqual([expect.objectContaining({ level: "error", msg: "process starter exited", signal: "SIGKILL", processes_killed: 1 })]);
    await once(child, "close");
    // Its pipes close as the kernel ends it; it leaves the process table a moment later.
    const deadline = performance.now() + 5_000;
    while (!gone(child.pid) && performance.now() < deadline) await new Promise((r) => setImmediate(r));
    expect(gone(child.pid)).toBe(true);
    const next = await spawner.spawn(wrapped(["/bin/sh", "-c", "read line; echo \"again $line\""]));
    const io = collect(next);
    const starter = stat(next.pid)!.ppid;
    expect(starter).not.toBe(helper);
    expect(stat(starter)!.ppid).toBe(process.pid);
    next.stdin.end("ok\n");
    await once(next, "close");
    expect(io.out()).toBe("again ok\n");
  });

  it("ends with a runner-host that dies while a child's pipes are being handed over, and the child is not left waiting at its gate", async () => {
    // A runner-host that asks for a child, holds its loop (no handle is acknowledged), names its
    // starter, and dies by SIGKILL mid-hand-over.
    const spawnerPath = JSON.stringify(join(REPO, "runner-host/harness/spawner.ts"));
    const { file, args } = wrapped(["/bin/sh", "-c", "read line; echo never"]);
    const script = `import { Spawner } from ${spawnerPath}; import { readdirSync, readFileSync, writeSync } from "node:fs";
      new Spawner().spawn(${JSON.stringify({ file, args })}).catch(() => {});
      const until = Date.now() + 800; while (Date.now() < until);
      const childrenOf = (pid) => readdirSync("/proc").filter((p) => /^\\d+$/.test(p)).filter((p) => { try { return readFileSync("/proc/" + p + "/stat", "utf8").split(") ")[1].split(" ")[1] === String(pid); } catch { return false; } });
      const [starter] = childrenOf(process.pid);
      writeSync(1, [starter, ...childrenOf(starter)].join(" ") + "\\n"); process.kill(process.pid, "SIGKILL");`;
    const host = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    host.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    await once(host, "exit");
    const [helper, ...kids] = out.trim().split(" ").map(Number);
    expect(helper).toBeGreaterThan(0);
    expect(kids).toHaveLength(1); // the child, waiting at its gate
    const deadline = performance.now() + 10_000;
    while (!(gone(helper!) && kids.every(gone)) && performance.now() < deadline) await new Promise((r) => setImmediate(r));
    expect({ helper: gone(helper!), kids: kids.every(gone) }).toEqual({ helper: true, kids: true });
  });
});

