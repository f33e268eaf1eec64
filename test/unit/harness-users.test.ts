/**
 * A user of its own for every harness process of a root runner-host (runner-host/harness/harness-users.ts):
 * never an id another running process has, freed only once nothing runs as it any more.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { harnessIdentity } from "../../runner-host/harness/clean-spawn.ts";
import { HarnessProcess } from "../../runner-host/harness/harness-process.ts";
import { DEFAULT_HARNESS_UIDS, harnessUidRange, harnessUserProblem, HarnessUsers, privateDirOf, removeStaleHarnessDirs, sweepStaleHarnessDirs } from "../../runner-host/harness/harness-users.ts";
import { processEnded } from "../helpers/process.ts";
import { rootDir } from "./harness-helpers.ts";

const me = process.getuid!();

describe("harness users", () => {
  // Users of their own are a root runner-host's (acquiring one makes a directory owned by the id).
  it.runIf(me === 0)("never hands out an id a running process has, nor one it already holds, and says when none is left", async () => {
    // A process running as `busy` (a sleeper started as 4242).
    const sleeper = spawn("sleep", ["30"], { uid: 4242, gid: 4242, stdio: "ignore" });
    const busy = 4242;
    const users = new HarnessUsers({ first: busy, last: busy + 2 });
    try {
      const ids = [users.acquire().uid, users.acquire().uid];
      expect(ids.sort()).toEqual([busy + 1, busy + 2]);
      expect(statSync(privateDirOf(busy + 1)).uid).toBe(busy + 1);
      expect(() => users.acquire()).toThrow(`every harness user id in ${busy}-${busy + 2} is in use`);
      await users.release(busy + 1);
      expect(existsSync(privateDirOf(busy + 1))).toBe(false);
      expect(users.acquire()).toEqual({ uid: busy + 1, gid: busy + 1 });
    } finally {
      sleeper.kill("SIGKILL");
      await Promise.all([busy + 1, busy + 2].map((u) => users.release(u)));
    }
  });

  it.runIf(me === 0)("two runner-hosts of one machine that choose an id before either starts its process never both get it", async () => {
    // Nothing runs as the id yet, so a scan of /proc alone would give it to both.
    const a = new HarnessUsers({ first: 4250, last: 4250 });
    const b = new HarnessUsers({ first: 4250, last: 4250 });
    expect(a.acquire()).toEqual({ uid: 4250, gid: 4250 });
    expect(() => b.acquire()).toThrow("every harness user id in 4250-4250 is in use");
    await a.release(4250);
    expect(b.acquire()).toEqual({ uid: 4250, gid: 4250 });
    await b.release(4250);
    expect(existsSync(privateDirOf(4250))).toBe(false);
  });

  it("reads SVC_HARNESS_UIDS as first-last, above 65535 by default, and refuses anything else", () => {
    expect(harnessUidRange(undefined)).toEqual(DEFAULT_HARNESS_UIDS);
    expect(DEFAULT_HARNESS_UIDS.first).toBeGreaterThan(65_535);
    expect(harnessUidRange(" 30000-30999 ")).toEqual({ first: 30_000, last: 30_999 });
    expect(() => harnessUidRange("30000")).toThrow("SVC_HARNESS_UIDS");
    expect(() => new HarnessUsers({ first: 5, last: 4 })).toThrow("is not a range of user ids");
    expect(() => new HarnessUsers({ first: 0, last: 4 })).toThrow("is not a range of user ids");
    // A runner-host refuses to start with a value it cannot use (every harness start would fail).
    expect(harnessUserProblem({ SVC_HARNESS_UIDS: "abc" })).toBe(me === 0 ? 'SVC_HARNESS_UIDS: "abc" is not first-last (e.g. 100000-199999)' : null);
    expect(harnessUserProblem({})).toBeNull();
  });

  it("a root runner-host gives each harness process a user of its own; one that is not root runs them as itself", () => {
    expect(harnessIdentity({})).toBe(me === 0 ? "own" : undefined);
    if (me === 0) {
      expect(harnessIdentity({ SVC_HARNESS_USER: "1234:1234" })).toEqual({ uid: 1234, gid: 1234 });
      expect(harnessIdentity({ SVC_HARNESS_USER: "root" })).toBeUndefined();
    }
  });

  // Only a root runner-host gives harnesses users of their own; without one, there is no user to
  // end anything by, and the process group kill is all there is.
  it.runIf(me === 0)("ends what a harness left running under its user once it exits (a child that left its process group)", async () => {
    // The child starts a `setsid` grandchild (a new session and group, out of reach of the group
    // kill), reports its pid on stderr and says ready.
    const script = `const {spawn}=require("node:child_process");const c=spawn("setsid",["sleep","300"],{stdio:"ignore"});c.unref();process.stderr.write("orphan "+c.pid+"\\n");process.stdout.write(JSON.stringify({type:"ready",protocol:1,engine:"leaver",max_line_bytes:1024})+"\\n");setInterval(()=>{},1000);`;
    const logs: Record<string, unknown>[] = [];
    const hp = await HarnessProcess.start({ command: ["node", "-e", script], rootDir: rootDir(), identity: "own", log: (r) => logs.push(r) });
    const orphan = await new Promise<number>((resolve) => {
      const look = () => {
        const line = logs.find((l) => l.msg === "harness stderr" && String(l.line).startsWith("orphan "));
        if (line) resolve(Number(String(line.line).slice(7)));
        else setImmediate(look);
      };
      look();
    });
    expect(existsSync(`/proc/${orphan}`)).toBe(true);
    await hp.kill();
    // SIGKILL was sent as the harness exited; the kernel ends the process as it next runs.
    const deadline = performance.now() + 5_000;
    while (!processEnded(orphan) && performance.now() < deadline) await new Promise((r) => setImmediate(r));
    expect(processEnded(orphan)).toBe(true);
  });

  it.runIf(me === 0)("ends a child that keeps forking under new pids, and what the user left in /tmp, /var/tmp and /dev/shm goes too", async () => {
    const mark = `svc-leftover-${process.pid}-${Date.now()}`;
    // The child hops: each generation forks the next and exits, every 5 ms, out of the process group.
    const script = `const {spawn,execFileSync}=require("node:child_process");const fs=require("node:fs");for(const d of ["/tmp","/var/tmp","/dev/shm"])fs.writeFileSync(d+"/${mark}","left",{mode:0o600});const c=spawn("setsid",["sh","-c","hop(){ (sleep 0.005; hop) & }; hop; sleep 0.001"],{stdio:"ignore"});c.unref();process.stdout.write(JSON.stringify({type:"ready",protocol:1,engine:"hopper",max_line_bytes:1024})+"\\n");setInterval(()=>{},1000);`;
    const hp = await HarnessProcess.start({ command: ["node", "-e", script], rootDir: rootDir(), identity: "own" });
    const uid = Number(readFileSync(`/proc/${hp.pid}/status`, "utf8").match(/^Uid:\s+(\d+)/m)![1]);
    await hp.kill();
    // `exited` resolves after the release: nothing runs as the user any more, nothing of it is left.
    const running = readdirSync("/proc").filter((p) => /^\d+$/.test(p) && statSync(`/proc/${p}`, { throwIfNoEntry: false })?.uid === uid);
    const alive = running.filter((p) => !/^State:\s+Z/m.test(readFileSync(`/proc/${p}/status`, "utf8")));
    expect(alive).toEqual([]);
    for (const d of ["/tmp", "/var/tmp", "/dev/shm"]) expect(existsSync(`${d}/${mark}`)).toBe(false);
  });

  it.runIf(me === 0)("a child writing into the private directory while the harness exits leaves the runner-host running, the directory gone", async () => {
    const script = `const {spawn}=require("node:child_process");const c=spawn("setsid",["sh","-c","i=0; while :; do mkdir -p a/b; : > a/b/f$i; i=$((i+1)); done"],{stdio:"ignore"});c.unref();process.stdout.write(JSON.stringify({type:"ready",protocol:1,engine:"writer",max_line_bytes:1024})+"\\n");setInterval(()=>{},1000);`;
    const logs: Record<string, unknown>[] = [];
    const hp = await HarnessProcess.start({ command: ["node", "-e", script], rootDir: rootDir(), identity: "own", log: (r) => logs.push(r) });
    await hp.kill();
    expect(existsSync(hp.workDir)).toBe(false);
    expect(logs.filter((l) => l.level === "error")).toEqual([]);
  });

  it.runIf(me === 0)("a private directory too young for the start-up sweep goes at the sweep once more a minute later", async () => {
    const tmp = mkdtempSync(path.join(tmpdir(), "svc-stale-"));
    try {
      const dir = path.join(tmp, "svc-harness-u150020");
      mkdirSync(dir);
      chownSync(dir, 150_020, 150_020);
      const almostAMinute = (Date.now() - 59_700) / 1000; // young at the first sweep, old at the second
      utimesSync(dir, almostAMinute, almostAMinute);
      let logged!: (l: { msg: string; fields: Record<string, unknown> }) => void;
      const second = new Promise<{ msg: string; fields: Record<string, unknown> }>((r) => (logged = r));
      sweepStaleHarnessDirs({ first: 150_020, last: 150_021 }, (_level, msg, fields = {}) => logged({ msg, fields }), { laterMs: 600, dirs: [tmp] });
      expect(existsSync(dir)).toBe(true);
      expect(await second).toEqual({ msg: "removed what killed harness users left", fields: { entries: 1 } });
      expect(existsSync(dir)).toBe(false);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  it.runIf(me === 0)("at start, removes what the users of a killed runner-host left, and only that; a fresh private directory's id is not handed out", async () => {
    const tmp = mkdtempSync(path.join(tmpdir(), "svc-stale-"));
    const sleeper = spawn("sleep", ["30"], { uid: 150_001, gid: 150_001, stdio: "ignore" });
    try {
      await once(sleeper, "spawn"); // running as its user from here on
      const old = Date.now() / 1000 - 3600;
      const make = (name: string, uid: number, aged = true) => {
        const dir = path.join(tmp, name);
        mkdirSync(path.join(dir, "home"), { recursive: true });
        chownSync(dir, uid, uid);
        if (aged) utimesSync(dir, old, old);
        return dir;
      };
      const stale = make("svc-harness-stale", 150_000); // in the range, nothing runs as it
      const live = make("svc-harness-live", 150_001); // its process still runs
      const fresh = make("svc-harness-fresh", 150_002, false); // just made, its process not started yet
      const outside = make("svc-harness-other", 4242); // not an id of the range
      const cache = make("a-cache", 150_003, false); // anything else a user of the range left, however new
      const stranger = make("someone-elses", 4243);
      expect(removeStaleHarnessDirs({ first: 150_000, last: 150_010 }, [tmp])).toBe(2);
      expect([stale, live, fresh, outside, cache, stranger].map((d) => existsSync(d))).toEqual([false, true, true, true, false, true]);
      // A private directory in the temporary directory keeps its id busy, even with no process.
      const own = path.join(tmpdir(), "svc-harness-leftover-test");
      mkdirSync(own);
      chownSync(own, 150_004, 150_004);
      const users = new HarnessUsers({ first: 150_004, last: 150_005 });
      try {
        expect(users.acquire()).toEqual({ uid: 150_005, gid: 150_005 });
      } finally {
        rmSync(own, { recursive: true, force: true });
        await users.release(150_005);
      }
    } finally {
      sleeper.kill("SIGKILL");
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
