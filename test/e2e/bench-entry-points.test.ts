/**
 * Every benchmark's documented entry point (`npm run bench:<name>`) still runs on this checkout: each
 * is started in its short mode, which keeps every phase and swaps the sizes for small ones, and must
 * exit 0. The figures printed in short mode mean nothing and are not read.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ROOT } from "../helpers/stack.ts";

const scripts = (JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8")) as { scripts: Record<string, string> }).scripts;
const benches = Object.keys(scripts).filter((s) => s.startsWith("bench:") && s !== "bench:short");

/** A short run starts its own stack and peers; a few seconds each on an idle box, ms. */
const SHORT_RUN_MS = 150_000;

function runShort(script: string): Promise<{ code: number | null; tail: string }> {
  return new Promise((resolve) => {
    const child = spawn("npm", ["run", "--silent", script, "--", "--short"], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out = (out + d).slice(-4000)));
    child.stderr.on("data", (d) => (out = (out + d).slice(-4000)));
    child.on("exit", (code) => resolve({ code, tail: out }));
  });
}

describe("benchmark entry points", () => {
  it("names at least one bench script", () => expect(benches.length).toBeGreaterThan(0));
  for (const script of benches) {
    it(`npm run ${script} -- --short exits 0`, async () => {
      const r = await runShort(script);
      expect(r.code, r.tail).toBe(0);
    }, SHORT_RUN_MS);
  }
});
