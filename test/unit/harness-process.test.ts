/**
 * `HarnessProcess` against tiny inline children (`node -e`) that misbehave on purpose, and against
 * the reference harness for the environment and exit behaviour.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { HarnessError, HarnessProcess } from "../../runner-host/harness/harness-process.ts";
import { attachJsonlReader, type JsonObject } from "../../runner-host/harness/jsonl.ts";
import { PooledProcess } from "../../runner-host/pooled-process.ts";
import { procStat } from "../helpers/process.ts";
import { commandHarness, OPENED, REFERENCE_HARNESS, REPO, rootDir, startHarness } from "./harness-helpers.ts";

const READY = `process.stdout.write(JSON.stringify({type:"ready",protocol:1,engine:"fake",max_line_bytes:1024})+"\\n");`;
/** A child that says ready, then answers each stdin line by running `onLine(line)`. */
const fake = (onLine: string, prelude = "") =>
  ["node", "-e", `${prelude}${READY} let b="";process.stdin.on("data",(c)=>{b+=c;let i;while((i=b.indexOf("\\n"))>=0){const line=b.slice(0,i);b=b.slice(i+1);${onLine}}});`];

async function startFake(command: string[], extra: { killGraceMs?: number; readyTimeoutMs?: number } = {}) {
  const logs: Record<string, unknown>[] = [];
  const hp = await HarnessProcess.start({ command, rootDir: rootDir(), log: (r) => logs.push(r), ...extra });
  return { hp, logs };
}

describe("HarnessProcess", () => {
  it("treats a garbage stdout line as a framing violation: kills the child, rejects the caller without quoting the line", async () => {
    const { hp } = await startFake(fake(`process.stdout.write("this is not json\\n");`));
    const err = await hp.request({ op: "ping" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HarnessError);
    expect((err as HarnessError).code).toBe("framing_violation");
    // The line may be another session's output (the process is shared): only the log quotes it.
    expect((err as Error).message).toBe("the harness broke stdio framing (the runner-host's log names how)");
    const exit = await hp.exited;
    expect(exit).toMatchObject({ reason: "framing_violation", code: null, signal: "SIGTERM" });
    expect(exit.message).toMatch(/unparsable line/);
    expect(existsSync(hp.workDir)).toBe(false);
  });

  it.each([
    ["an unknown message type", `process.stdout.write(JSON.stringify({type:"mystery"})+"\\n");`],
    ["an unknown field", `const c=JSON.parse(line);process.stdout.write(JSON.stringify({type:"response",id:c.id,ok:true,result:{sessions:0,running:0},extra:1})+"\\n");`],
    ["a response to an id never sent", `process.stdout.write(JSON.stringify({type:"response",id:"zz",ok:true,result:{}})+"\\n");`],
    ["a malformed result for the op", `const c=JSON.parse(line);process.stdout.write(JSON.stringify({type:"response",id:c.id,ok:true,result:{nope:1}})+"\\n");`],
  ])("treats %s as a framing violation", async (_, onLine) => {
    const { hp } = await startFake(fake(onLine));
    await expect(hp.request({ op: "ping" })).rejects.toMatchObject({ code: "framing_violation" });
    expect(await hp.exited).toMatchObject({ reason: "framing_violation" });
  });

  it("names the field of a malformed result in the framing violation", async () => {
    const { hp } = await startFake(fake(`const c=JSON.parse(line);process.stdout.write(JSON.stringify({type:"response",id:c.id,ok:true,result:{sessions:0,running:null}})+"\\n");`));
    await expect(hp.request({ op: "ping" })).rejects.toMatchObject({ code: "framing_violation" });
    expect((await hp.exited).message).toMatch(/^framing violation: malformed ping result \(running: .*number.*\)/);
  });

  it("drops a response that comes after its request timed out and keeps serving; a second response to an id is a framing violation", async () => {
    const logs: Record<string, unknown>[] = [];
    let lateSeen!: () => void;
    const late = new Promise<void>((resolve) => (lateSeen = resolve));
    const answer = `const c=JSON.parse(line);const r=JSON.stringify({type:"response",id:c.id,ok:true,result:{sessions:0,running:0}})+"\\n";`;
    const hp = await HarnessProcess.start({
      command: fake(`${answer}if(c.id==="c1")setTimeout(()=>process.stdout.write(r),300);else if(c.id==="c3")process.stdout.write(r+r);else process.stdout.write(r);`),
      rootDir: rootDir(),
      log: (r) => {
        logs.push(r);
        if (r.msg === "harness answered after its request timed out: dropped") lateSeen();
      },
    });
    await expect(hp.request({ op: "ping" }, { timeoutMs: 100 })).rejects.toMatchObject({ code: "request_timeout" });
    await late;
    expect(await hp.request({ op: "ping" })).toMatchObject({ ok: true });
    expect(await hp.request({ op: "ping" })).toMatchObject({ ok: true }); // answered twice
    expect(await hp.exited).toMatchObject({ reason: "framing_violation", message: expect.stringContaining('never sent or already answered: "c3"') });
  });

  it("correlates responses by id", async () => {
    const { hp } = await startFake(fake(`const c=JSON.parse(line);process.stdout.write(JSON.stringify({type:"response",id:c.id,ok:true,result:{sessions:7,running:1}})+"\\n");`));
    expect(await hp.request({ op: "ping" })).toMatchObject({ ok: true, result: { sessions: 7, running: 1 } });
    await hp.kill();
  });

  it("rejects a pending request when the child exits, with code and signal reported apart", async () => {
    const { hp } = await startFake(fake(`process.exit(3);`));
    await expect(hp.request({ op: "ping" })).rejects.toMatchObject({ code: "exited" });
    expect(await hp.exited).toEqual({ code: 3, signal: null, reason: "exited", message: "the harness exited" });
    await expect(hp.request({ op: "ping" })).rejects.toMatchObject({ code: "not_running" });
  });

  it("escalates kill() to SIGKILL for a child that ignores SIGTERM", async () => {
    const { hp } = await startFake(fake("", `process.on("SIGTERM",()=>{});setInterval(()=>{},1000);`), { killGraceMs: 300 });
    const exit = await hp.kill();
    expect(exit).toMatchObject({ reason: "killed", code: null, signal: "SIGKILL" });
  });

  it("fails start when ready does not arrive in time", async () => {
    const err = await startFake(["node", "-e", "setInterval(()=>{},1000)"], { readyTimeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HarnessError);
    expect((err as Error).message).toMatch(/ready_timeout/);
  });

  it("fails start when the child dies before ready; its stderr goes to the log, not into the error", async () => {
    const logs: Record<string, unknown>[] = [];
    const command = ["node", "-e", `console.error("cannot start: boom");process.exit(9)`];
    const err = await HarnessProcess.start({ command, rootDir: rootDir(), log: (r) => logs.push(r) }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/exited before ready \(exited, code 9\)/);
    expect((err as Error).message).not.toContain("boom");
    expect(logs.find((l) => l.msg === "harness exited")).toMatchObject({ code: 9, stderr_tail: "cannot start: boom" });
  });

  it("reports a command that cannot be spawned as spawn_failed", async () => {
    const err = await startFake(["/nonexistent/harness-binary"]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HarnessError);
    expect((err as Error).message).toMatch(/spawn_failed.*ENOENT/);
  });

  it("keeps stdout for the protocol: the harness stdout guard diverts library output to stderr", async () => {
    const guard = join(REPO, "runner-host/reference-harness/stdout-guard.ts");
    const script = `import { writeProtocol } from ${JSON.stringify(guard)}; console.log("library noise"); process.stdout.write("more noise\\n"); writeProtocol(JSON.stringify({type:"ready",protocol:1,engine:"guarded",max_line_bytes:1024})+"\\n"); setInterval(()=>{},1000);`;
    const { hp, logs } = await startFake(["node", "--input-type=module", "-e", script]);
    expect(hp.ready.engine).toBe("guarded");
    await hp.kill();
    const lines = logs.filter((l) => l.msg === "harness stderr").map((l) => l.line);
    expect(lines).toEqual(expect.arrayContaining(["library noise", "more noise"]));
  });

  it("re-logs stderr lines as records and redacts provider keys from them", async () => {
    const { hp, logs } = await startFake(fake(`process.stderr.write("got "+line+"\\n");const c=JSON.parse(line);process.stdout.write(JSON.stringify({type:"response",id:c.id,ok:true,result:{engine:"f",catalog:"f"}})+"\\n");`));
    await hp.request({ op: "init", protocol: 1, providers: { openai: { key: "sk-secret-value-123" } } });
    await hp.kill();
    const lines = logs.filter((l) => l.msg === "harness stderr").map((l) => String(l.line));
    expect(lines.some((l) => l.includes('"op":"init"'))).toBe(true);
    expect(JSON.stringify(logs)).not.toContain("sk-secret-value-123");
    expect(lines.join("\n")).toContain("[redacted]");
  });

  it("redacts a key quoted by a fatal message wherever that message goes (its log, the exit record, requests' errors)", async () => {
    const { hp, logs } = await startFake(fake(`const c=JSON.parse(line);if(c.op==="init"){process.stdout.write(JSON.stringify({type:"response",id:c.id,ok:true,result:{engine:"f",catalog:"f"}})+"\\n");}else{process.stdout.write(JSON.stringify({type:"fatal",message:"I give up (sk-fatal-secret-42)"})+"\\n");setTimeout(()=>process.exit(1),200);}`));
    await hp.request({ op: "init", protocol: 1, providers: { openai: { key: "sk-fatal-secret-42" } } });
    const err = await hp.request({ op: "ping" }).catch((e: unknown) => e);
    const exit = await hp.exited;
    expect(exit).toMatchObject({ reason: "fatal", message: "I give up ([redacted])" });
    expect((err as Error).message).toContain("[redacted]");
    expect(JSON.stringify(logs)).not.toContain("sk-fatal-secret-42");
    expect(logs.find((l) => l.msg === "harness exited")).toMatchObject({ message: "I give up ([redacted])" });
  });

  it("ends a process that writes fatal and stays: signalled after 1 s, its fatal message kept as the reason", async () => {
    const { hp } = await startFake(fake(`process.stdout.write(JSON.stringify({type:"fatal",message:"I give up"})+"\\n");`, `process.on("SIGTERM",()=>{});process.stdin.on("end",()=>{});setInterval(()=>{},1000);`), { killGraceMs: 500 });
    let ending = false;
    hp.onEnding(() => (ending = true));
    await expect(hp.request({ op: "ping" })).rejects.toMatchObject({ code: "exited", message: "harness fatal: I give up" });
    expect(ending).toBe(true);
    await expect(hp.request({ op: "ping" })).rejects.toMatchObject({ code: "not_running" });
    // It ignores SIGTERM: only the SIGKILL after the grace ends it.
    expect(await hp.exited).toMatchObject({ reason: "fatal", message: "I give up", signal: "SIGKILL" });
  });

  it("kills a process at once when asked after its fatal, without waiting for the fatal grace", async () => {
    const { hp } = await startFake(fake(`process.stdout.write(JSON.stringify({type:"fatal",message:"stuck"})+"\\n");`, `setInterval(()=>{},1000);`));
    await expect(hp.request({ op: "ping" })).rejects.toMatchObject({ code: "exited" });
    const t0 = performance.now();
    const exit = await hp.kill();
    expect(exit).toMatchObject({ reason: "fatal", message: "stuck", signal: "SIGTERM" });
    expect(performance.now() - t0).toBeLessThan(900);
  });

  it("ends a process that closes its stdout and keeps running (it can no longer answer or end a turn)", async () => {
    const { hp, logs } = await startFake(fake("", `setTimeout(()=>process.stdout.end(),50);setInterval(()=>{},1000);`));
    const exit = await hp.exited;
    expect(exit).toMatchObject({ reason: "framing_violation", message: "framing violation: stdout closed while the process kept running" });
    expect(logs.find((l) => l.msg === "harness framing violation")).toBeDefined();
  });

  it("re-logs at most 200 stderr lines a second and counts the rest in one record when that second ends", async () => {
    // 5,000 lines at once, then silence: the count must not wait for another line or the exit.
    let onDropped!: (record: Record<string, unknown>) => void;
    const dropped = new Promise<Record<string, unknown>>((resolve, reject) => {
      onDropped = resolve;
      setTimeout(() => reject(new Error("no 'harness stderr lines dropped' record within 5 s")), 5_000).unref();
    });
    const logs: Record<string, unknown>[] = [];
    const hp = await HarnessProcess.start({
      command: fake("", `setTimeout(()=>{for(let i=0;i<5000;i++)process.stderr.write("noise "+i+"\\n");},50);`),
      rootDir: rootDir(),
      log: (r) => {
        logs.push(r);
        if (r.msg === "harness stderr lines dropped") onDropped(r);
      },
    });
    expect(await dropped).toMatchObject({ dropped: 4800, limit_per_second: 200 });
    const relogged = logs.filter((l) => l.msg === "harness stderr");
    expect(hp.exitInfo).toBeUndefined();
    expect(relogged).toHaveLength(200);
    expect(relogged[0]).toMatchObject({ line: "noise 0" });
    expect(relogged[199]).toMatchObject({ line: "noise 199" });
    await hp.kill();
  });

  it("gives the reference harness a stripped environment, private dirs, and no keys in env or argv", async () => {
    process.env.SVC_TEST_HOST_SECRET = "host-secret-should-not-leak";
    try {
      const { hp } = await startHarness();
      await hp.request({ op: "init", protocol: 1, providers: { openai: { key: "sk-never-in-env" } } });
      const environ = readFileSync(`/proc/${hp.pid}/environ`, "utf8").split("\0").filter(Boolean);
      const env = Object.fromEntries(environ.map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
      expect(Object.keys(env).sort()).toEqual(["HOME", "LANG", "PATH", "TMPDIR"]);
      expect(env).toMatchObject({ HOME: join(hp.workDir, "home"), TMPDIR: join(hp.workDir, "tmp"), LANG: "C.UTF-8" });
      expect(readlinkSync(`/proc/${hp.pid}/cwd`)).toBe(join(hp.workDir, "work"));
      const cmdline = readFileSync(`/proc/${hp.pid}/cmdline`, "utf8");
      expect(cmdline.split("\0")[0]).toBe(process.execPath);
      for (const text of [environ.join("\n"), cmdline]) {
        expect(text).not.toContain("sk-never-in-env");
        expect(text).not.toContain("host-secret-should-not-leak");
      }
      hp.endInput();
      expect(await hp.exited).toMatchObject({ code: 0, signal: null, reason: "exited" });
      expect(existsSync(hp.workDir)).toBe(false);
    } finally {
      delete process.env.SVC_TEST_HOST_SECRET;
    }
  });

  it("runs the reference harness in its own process group", async () => {
    const { hp } = await startHarness();
    expect(procStat(hp.pid)?.pgrp).toBe(hp.pid);
    expect(await hp.kill()).toMatchObject({ reason: "killed", signal: "SIGTERM" });
  });
});

describe("reference harness stdin handling", () => {
  it("answers a bad stdin line with fatal and exits 2", async () => {
    const child = spawn(process.execPath, REFERENCE_HARNESS.slice(1), { cwd: REPO, stdio: ["pipe", "pipe", "pipe"], env: { PATH: process.env.PATH } });
    const out: JsonObject[] = [];
    attachJsonlReader(child.stdout, { onMessage: (v) => out.push(v), onError: () => {} });
    const exited = new Promise<[number | null, string | null]>((r) => child.on("close", (code, sig) => r([code, sig])));
    child.stdin.write('{"id":"1","op":"ping"}\nthis is not a command\n');
    expect(await exited).toEqual([2, null]);
    expect(out.map((m) => m.type)).toEqual(["ready", "response", "fatal"]);
    expect(out[2]).toMatchObject({ message: expect.stringMatching(/framing violation/) });
  });

  it("answers a command with an unknown field with fatal and exits 2", async () => {
    const child = spawn(process.execPath, REFERENCE_HARNESS.slice(1), { cwd: REPO, stdio: ["pipe", "pipe", "pipe"], env: { PATH: process.env.PATH } });
    const out: JsonObject[] = [];
    attachJsonlReader(child.stdout, { onMessage: (v) => out.push(v), onError: () => {} });
    const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
    child.stdin.write('{"id":"1","op":"ping","extra":true}\n');
    expect(await exited).toBe(2);
    expect(out.map((m) => m.type)).toEqual(["ready", "fatal"]);
  });
});

describe("PooledProcess", () => {
  it("a late answer to an open acts only for the latest open of that session: an open of it in flight is not detached", async () => {
    // Takes commands in order, the first open 400 ms late (its timeout: 300 ms); `ping` reports how many sessions are open.
    const command = commandHarness(
      "late-open",
      `globalThis.open ??= new Set(); globalThis.opens ??= 0;
       if (cmd.op === "init") ok({ engine: "e", catalog: "c" });
       else if (cmd.op === "open") { if (++globalThis.opens === 1) { const t = Date.now(); while (Date.now() - t < 400); } open.add(cmd.session); ok(${OPENED}); }
       else if (cmd.op === "detach") { open.delete(cmd.session); ok({}); }
       else if (cmd.op === "ping") ok({ sessions: open.size, running: 0 });
       else ok({});`,
    );
    const p = new PooledProcess(
      { harness: "h", tenant: "t", command, rootDir: rootDir(), log: () => {}, requestTimeoutMs: 300 },
      { openai: { prefix: "openai", key: "k-test" } },
      () => {},
    );
    try {
      await p.ready;
      const cmd = { model: "openai/gpt-4o-mini", tools: [] };
      await expect(p.open("s1", cmd)).rejects.toThrow(/the harness did not answer: open got no response within 300 ms/);
      // Opened again at once: this open is written before the first one's late answer comes.
      expect(await p.open("s1", cmd)).toMatchObject({ provider: "openai", id: "gpt-4o-mini" });
      expect(p.sessions.has("s1")).toBe(true);
      expect(await p.hp!.request({ op: "ping" })).toMatchObject({ ok: true, result: { sessions: 1 } });
    } finally {
      await p.stop();
    }
  });
});
