/**
 * Every benchmark's documented entry point (`npm run bench:<name>`) still runs on this checkout: each
 * is started in its short mode, which keeps every phase and swaps the sizes for small ones, and must
 * exit 0. The figures printed in short mode mean nothing and are not read; only the peers bench's
 * table is checked for a figure in every column (each of its turns is checked against the
 * provider's script by the bench itself, which exits 1 otherwise).
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ROOT } from "../helpers/stack.ts";

const scripts = (JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8")) as { scripts: Record<string, string> }).scripts;
/** `bench:short` and `bench:all` chain the others (full-size, for `bench:all`). */
const benches = Object.keys(scripts).filter((s) => s.startsWith("bench:") && s !== "bench:short" && s !== "bench:all");

/** A short run starts its own stack and peers; a few seconds each on an idle box, ms. */
const SHORT_RUN_MS = 150_000;

function runShort(script: string): Promise<{ code: number | null; tail: string }> {
  return new Promise((resolve) => {
    const child = spawn("npm", ["run", "--silent", script, "--", "--short"], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out = (out + d).slice(-8000)));
    child.stderr.on("data", (d) => (out = (out + d).slice(-8000)));
    child.on("exit", (code) => resolve({ code, tail: out }));
  });
}

describe("benchmark entry points", () => {
  it("names at least one bench script", () => expect(benches.length).toBeGreaterThan(0));
  for (const script of benches) {
    it(`npm run ${script} -- --short exits 0`, async () => {
      const r = await runShort(script);
      expect(r.code, r.tail).toBe(0);
      if (script === "bench:peers") {
        // A figure for direct, the service, LangGraph and agents in each row, and the text check.
        const figures = String.raw`\| [\d.]+ \| [\d.]+ \(.+?× direct\) \| [\d.]+ \(.+?× direct\) \| [\d.]+ \(.+?× direct\) \|`;
        for (const row of ["first output p50", "first output p99", "one long turn", "concurrent sessions"]) expect(r.tail, r.tail).toMatch(new RegExp(`\\| [^|]*${row}[^|]*${figures}`));
        expect(r.tail).toContain("checked: every measured turn's joined text equals the provider's script");
      }
    }, SHORT_RUN_MS);
  }
});
