/**
 * The code type-checks as CONTRIBUTING.md's `npm run typecheck` checks it (the Worker with its
 * workers-pool tests; the Node side with its tests, benches and scripts), so `npm test` — what CI
 * runs — fails on a type error as it does on a failing test.
 */
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { ROOT } from "../helpers/stack.ts";

/** Both projects take ~8 s on the 2-core box; room for a busy one, ms. */
const TYPECHECK_MS = 120_000;

function typecheck(): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn("npm", ["run", "--silent", "typecheck"], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out = (out + d).slice(-8000)));
    child.stderr.on("data", (d) => (out = (out + d).slice(-8000)));
    child.on("exit", (code) => resolve({ code, out }));
  });
}

describe("types", () => {
  it("npm run typecheck exits 0", { timeout: TYPECHECK_MS }, async () => {
    const r = await typecheck();
    expect(r.code, r.out).toBe(0);
  });
});
