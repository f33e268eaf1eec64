import { execFileSync, spawnSync } from "node:child_process";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { oldNodeProblem } from "../../cli/node-version.mjs";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** A Node older than 24 on this machine's PATH (the machine's own Node runs `npm ci`), if there is one. */
function olderNode(): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "" || dir.includes("node_modules")) continue;
    const candidate = join(dir, "node");
    try {
      const version = execFileSync(candidate, ["--version"], { encoding: "utf8", timeout: 10_000 }).trim();
      if (Number.parseInt(version.slice(1), 10) < 24) return candidate;
    } catch {
      // Not there, or not runnable: try the next directory.
    }
  }
  return undefined;
}

describe("the svc command names the Node it needs", () => {
  it("refuses a Node older than 24 with the version it found and where Node 24 is", () => {
    expect(oldNodeProblem("20.20.2")).toBe(
      "svc needs Node 24 or later and this is Node 20.20.2: run it through npm (npm start, npx svc) or with the project's own Node 24, node_modules/.bin/node",
    );
    expect(oldNodeProblem("23.11.0")).toContain("this is Node 23.11.0");
    expect(oldNodeProblem("24.0.0")).toBeNull();
    expect(oldNodeProblem(process.versions.node)).toBeNull();
  });

  it("exits 1 with one JSON line when an older Node runs cli/svc.mjs", () => {
    // The machine's own older Node when there is one (it also shows the file parses there);
    // else this Node, told it is 20.1.0 before svc.mjs runs.
    const node = olderNode();
    const args = node ? [] : ["--import", `data:text/javascript,${encodeURIComponent('Object.defineProperty(process, "versions", { value: { ...process.versions, node: "20.1.0" } })')}`];
    const r = spawnSync(node ?? process.execPath, [...args, join(root, "cli/svc.mjs"), "-config", join(root, "examples/local.json")], { encoding: "utf8", timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe("");
    const lines = r.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(line).toMatchObject({ level: "error" });
    expect(line.msg).toMatch(/^svc: could not start: svc needs Node 24 or later and this is Node 2[0-3]\./);
  });
});
