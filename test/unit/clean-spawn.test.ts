/**
 * The harness start wrapper's descriptor step (runner-host/harness/clean-spawn.ts), run in a live
 * Node that keeps working afterwards, as the wrapper does until its execve.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { closeSync, openSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { CLOSE_INHERITED } from "../../runner-host/harness/clean-spawn.ts";

/** After the step: churn the heap (V8 posts delayed GC tasks through the platform's event loop), then list what is open. */
const AFTER = `let a = []; for (let i = 0; i < 3e5; i++) { a.push({ i, s: "x".repeat(i % 100) }); if (i % 50000 === 0) a = []; }
setTimeout(() => { const out = {}; for (const n of fs.readdirSync("/proc/self/fd")) { try { out[n] = fs.readlinkSync("/proc/self/fd/" + n); } catch {} } process.stdout.write(JSON.stringify(out)); }, 200);`;

describe("the harness start wrapper", () => {
  it("closes an inherited descriptor and leaves Node's own, which it keeps using until execve, open", async () => {
    const inherited = openSync(import.meta.filename, "r");
    // The inherited descriptor at 200, as the fd 251 a CI runner leaves open.
    const stdio: ("pipe" | "ignore" | number)[] = ["ignore", "pipe", "pipe", ...Array<"ignore">(197).fill("ignore"), inherited];
    const child = spawn(process.execPath, ["-e", `${CLOSE_INHERITED}\n${AFTER}`], { stdio });
    closeSync(inherited);
    let out = "";
    child.stdout!.on("data", (c: Buffer) => (out += c));
    const [code, signal] = (await once(child, "exit")) as [number | null, string | null];
    expect({ code, signal }).toEqual({ code: 0, signal: null }); // closing Node's own loop descriptors aborts it (SIGABRT)
    const open = JSON.parse(out) as Record<string, string>;
    expect(open["200"]).toBeUndefined();
    expect(Object.values(open)).not.toContain(import.meta.filename);
    expect(Object.values(open)).toContain("anon_inode:[eventpoll]");
  });
});
