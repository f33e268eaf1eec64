/**
 * The repository stands alone and its documented commands run as written on a fresh clone: no
 * comment or page points at documents outside the repository, every `npm run` names a script,
 * no shell example runs a `.ts` file with a bare `node` (an older system Node cannot load it; npm
 * scripts and npx put the project's Node 24 first), every relative link resolves, and every
 * repository path a file names exists. The bench entry points themselves run in short mode in
 * test/bench/entry-points.test.ts.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SOURCE_DIRS = ["src", "runner-host", "test", "bench", "docs", "examples", "cli", "client", "chaos", "scripts", "migrations", ".ci"];
const ROOT_FILES = ["README.md", "CONTRIBUTING.md", "package.json", "wrangler.toml", "tsconfig.json"];
const TEXT = /\.(ts|mts|mjs|js|json|md|sql|toml)$|^run$/;

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === "node_modules" || name.startsWith(".svc")) return [];
    return statSync(path).isDirectory() ? walk(path) : TEXT.test(name) ? [path] : [];
  });
}

const files = [...SOURCE_DIRS.flatMap((d) => walk(join(ROOT, d))), ...ROOT_FILES.map((f) => join(ROOT, f)).filter(existsSync)];
const markdown = files.filter((f) => f.endsWith(".md"));
const scripts = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;

/** Shell lines of the fenced ```sh blocks of a markdown file, and its inline code spans. */
function shellLines(text: string): string[] {
  const blocks = [...text.matchAll(/```(?:sh|bash|shell)\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split("\n"));
  const inline = [...text.replace(/```[\s\S]*?```/g, "").matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
  return [...blocks, ...inline];
}

describe("documentation", () => {
  it("has no pointer to a document outside the repository", () => {
    // Assembled so this file does not match itself.
    const outside = new RegExp(["DECISIONS", "ARCHITECTURE"].map((n) => `${n}\\.md`).join("|") + "|pi-harness\\.md|\\.\\./shared/(spec|design|research|bench-peers)");
    const hits = files.filter((f) => outside.test(readFileSync(f, "utf8"))).map((f) => relative(ROOT, f));
    expect(hits).toEqual([]);
  });

  it("cites no outside specification by name or section", () => {
    // A citation of an outside specification, by its short name or a quoted section of it, cannot be
    // followed from the repository: docs/api.md and docs/configuration.md state the rules, so a
    // comment or page cites their sections instead.
    const cited = new RegExp(["\\b([Tt]he|[Aa]) spec(ification)?\\b", "\\bspec(ification)?'s\\b", '\\b[Ss]pec "', "\\b[Ss]pec [A-Z]", "\\bSpec\\b"].join("|"));
    const hits = files.flatMap((f) =>
      readFileSync(f, "utf8")
        .split("\n")
        .flatMap((line, i) => (cited.test(line) ? [`${relative(ROOT, f)}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(hits).toEqual([]);
  });

  it("names only npm scripts that exist", () => {
    const missing = markdown.flatMap((f) =>
      [...readFileSync(f, "utf8").matchAll(/npm run ([\w:-]+)/g)].filter((m) => !(m[1]! in scripts)).map((m) => `${relative(ROOT, f)}: npm run ${m[1]}`),
    );
    expect(missing).toEqual([]);
  });

  it("runs no .ts file with a bare node in a shell example", () => {
    const bare = markdown.flatMap((f) =>
      shellLines(readFileSync(f, "utf8"))
        .filter((l) => /^\s*node\s+\S+\.ts\b/.test(l))
        .map((l) => `${relative(ROOT, f)}: ${l.trim()}`),
    );
    expect(bare).toEqual([]);
  });

  it("has every relative link resolve to a file in the repository", () => {
    const broken = markdown.flatMap((f) =>
      [...readFileSync(f, "utf8").matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)]
        .map((m) => m[1]!)
        .filter((target) => !/^[a-z]+:/.test(target) && !existsSync(join(dirname(f), target)))
        .map((target) => `${relative(ROOT, f)}: ${target}`),
    );
    expect(broken).toEqual([]);
  });

  it("names only repository paths that exist, in docs and in comments", () => {
    // A path written from the repository root (`src/…`, `runner-host/…`), not a glob such as
    // `test/unit/config-*.test.ts`: after a file moves, every mention of its old place fails here.
    const named = /(?<![\w./-])((?:src|runner-host|test|bench|cli|docs|examples|migrations|chaos|client|scripts)\/[\w./-]*[\w/])(?![\w/]*-?\*)/g;
    const stale = files.flatMap((f) =>
      [...readFileSync(f, "utf8").matchAll(named)].filter((m) => !existsSync(join(ROOT, m[1]!))).map((m) => `${relative(ROOT, f)}: ${m[1]}`),
    );
    expect(stale).toEqual([]);
  });

  it("gives every benchmark an npm entry point with a short mode run by bench:short", () => {
    const benches = readdirSync(join(ROOT, "bench")).filter((n) => n.endsWith(".ts") && !["lib.ts", "proc.ts", "args.ts", "profile.ts", "harness-profile.ts", "service-turns.ts", "sched-trace.ts"].includes(n));
    for (const b of benches) {
      const name = b.replace(/\.ts$/, "");
      expect(scripts[`bench:${name}`]).toBe(`node bench/${b}`);
      expect(scripts["bench:short"]).toContain(`node bench/${b} --short`);
    }
  });
});
