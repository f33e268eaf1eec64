/**
 * The reference harness as it ships: built to runner-host/reference-harness/dist/ by
 * scripts/build-harness.ts (the tests' global setup runs it). Checks that the build is current,
 * that it keeps the stdout guard ahead of every library, and that it talks to each provider
 * transport exactly as the `.ts` sources do.
 */
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { build, stop } from "esbuild";
import { BUILD_OPTIONS, catalogAsJson, HARNESS_DIST, REFERENCE_HARNESS_COMMAND, staleFiles } from "../../scripts/build-harness.ts";
import { EventLog, ok, REPO, startHarness } from "./harness-helpers.ts";

/** Static imports of a built module (`import"./x.mjs"`, `import{a}from"./x.mjs"`), not `import("…")`. */
function staticImports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/\bimport\s*(?:[\w$*{}\s,]+from\s*)?"(\.{1,2}\/[^"]+\.mjs)"/g)].map((m) => join(file, "..", m[1]!));
}

/** Every file main.mjs loads before its first line runs. */
function staticClosure(entry: string): Set<string> {
  const seen = new Set<string>();
  const visit = (f: string) => {
    for (const dep of staticImports(f)) if (!seen.has(dep)) (seen.add(dep), visit(dep));
  };
  visit(entry);
  return seen;
}

describe("the built reference harness", () => {
  it("is what the current sources build to, and the examples run it with the documented command", async () => {
    expect(await staleFiles()).toEqual([]);
    for (const file of ["examples/local.json", "examples/runner.json"]) {
      const config = JSON.parse(readFileSync(join(REPO, file), "utf8"));
      expect(config.harnesses.pi.command, file).toEqual(REFERENCE_HARNESS_COMMAND);
    }
  });

  it("installs the stdout guard before any library code runs: library output at load time never reaches the protocol", async () => {
    const entry = join(HARNESS_DIST, "main.mjs");
    const early = staticClosure(entry);
    // What runs before main.mjs's first line is the guard and the bundler's helpers, no library.
    const earlyBytes = [...early].reduce((n, f) => n + readFileSync(f).length, 0);
    expect(earlyBytes).toBeLessThan(4096);
    expect([...early].some((f) => readFileSync(f, "utf8").includes("process.stderr.write"))).toBe(true);

    // Every other module of the build writes to stdout as it loads, like a chatty library would.
    const hook = join(tmpdir(), `svc-noisy-chunks-${process.pid}.mjs`);
    const quiet = [pathToFileURL(entry).href, ...[...early].map((f) => pathToFileURL(f).href)];
    writeFileSync(
      hook,
      `import { registerHooks } from "node:module";
       const quiet = new Set(${JSON.stringify(quiet)});
       registerHooks({ load(url, context, next) {
         const r = next(url, context);
         if (!url.startsWith(${JSON.stringify(pathToFileURL(HARNESS_DIST).href)}) || quiet.has(url)) return r;
         return { ...r, source: String(r.source) + ";process.stdout.write('noise from ' + " + JSON.stringify(url.split("/").pop()) + " + '\\\\n');" };
       } });`,
    );
    chmodSync(hook, 0o644); // the harness may run as another user
    const provider = await startScriptedProvider();
    const [node, ...args] = REFERENCE_HARNESS_COMMAND;
    try {
      const { hp, logs } = await startHarness({ command: [node!, "--import", hook, ...args] });
      await ok(hp, { op: "init", protocol: 1, providers: { openai: { key: "k", base_url: provider.url, api: "openai-completions" } } });
      const log = new EventLog(hp, "s1");
      await ok(hp, { op: "open", session: "s1", model: "openai/gpt-4o-mini", tools: [] });
      await ok(hp, { op: "run", session: "s1", turn: "t1", text: "[[deltas 3]]" });
      expect(await log.next("turn.end")).toMatchObject({ status: "completed" });
      await hp.kill();
      const noise = logs.filter((l) => l.msg === "harness stderr" && String(l.line).startsWith("noise from ")).map((l) => String(l.line));
      expect(noise.some((l) => /noise from serve-/.test(l))).toBe(true);
      expect(noise.some((l) => /noise from openai-completions-/.test(l))).toBe(true);
      expect(logs.filter((l) => l.msg === "harness framing violation" || l.msg === "harness fatal")).toEqual([]);
    } finally {
      rmSync(hook, { force: true });
      await provider.close();
    }
  });
});

describe("the built reference harness's model catalog", () => {
  const catalogFile = join(REPO, "node_modules/@mariozechner/pi-ai/dist/models.generated.js");

  it("is pi-ai's catalog, bundled as one JSON string the JSON parser reads instead of an object literal", async () => {
    const { MODELS } = (await import(pathToFileURL(catalogFile).href)) as { MODELS: unknown };
    const text = await catalogAsJson(catalogFile);
    const rebuilt = (await import(`data:text/javascript,${encodeURIComponent(text)}`)) as { MODELS: unknown };
    expect(rebuilt.MODELS).toStrictEqual(MODELS);
    const chunks = readdirSync(join(HARNESS_DIST, "chunks")).map((f) => readFileSync(join(HARNESS_DIST, "chunks", f), "utf8"));
    expect(chunks.filter((c) => c.includes(`JSON.parse('{"amazon-bedrock":`))).toHaveLength(1);
    expect(chunks.filter((c) => c.includes('"amazon-bedrock":{id:'))).toEqual([]);
  });

  it("fails the build for a catalog that is not plain JSON data, rather than changing it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-catalog-"));
    try {
      const cases = {
        "undefined.mjs": "export const MODELS = { a: { maxTokens: undefined } };",
        "function.mjs": "export const MODELS = { a: { cost: () => 1 } };",
        "infinity.mjs": "export const MODELS = { a: { contextWindow: Infinity } };",
        "more.mjs": "export const MODELS = {}; export const EXTRA = 1;",
      };
      for (const [name, source] of Object.entries(cases)) {
        writeFileSync(join(dir, name), source);
        await expect(catalogAsJson(join(dir, name)), name).rejects.toThrow(/not a catalog of plain JSON data/);
      }
      writeFileSync(join(dir, "plain.mjs"), 'export const MODELS = { "a": { "id": "a", "n": 1.5, "on": false, "in": ["text"] } };');
      expect(await catalogAsJson(join(dir, "plain.mjs"))).toBe(`export const MODELS = JSON.parse(${JSON.stringify('{"a":{"id":"a","n":1.5,"on":false,"in":["text"]}}')});\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the built reference harness's zod", () => {
  it("carries zod's English messages only (nothing in the harness or its libraries selects another locale)", async () => {
    const result = await build({ ...BUILD_OPTIONS, metafile: true });
    await stop();
    const locales = Object.keys(result.metafile!.inputs).filter((f) => f.includes("zod/v4/locales/")).map((f) => f.replace(/^.*zod\/v4\/locales\//, ""));
    expect(locales.sort()).toEqual(["en.js", "index.js"]);
  });
});

/**
 * Each transport a provider may be switched to (`api`), pointed at the scripted provider: only
 * `openai-completions` has a route there, the others get its 404. What matters is that the built
 * harness loads each provider client and sends the same requests, with the same outcome, as the
 * sources do.
 */
const TRANSPORTS = [
  { prefix: "openai", api: "openai-completions", model: "openai/gpt-4o-mini" },
  { prefix: "openai", api: "openai-responses", model: "openai/gpt-4o-mini" },
  { prefix: "anthropic", api: "anthropic-messages", model: "anthropic/claude-haiku-4-5" },
  { prefix: "google", api: "google-generative-ai", model: "google/gemini-2.5-flash" },
  { prefix: "mistral", api: "mistral-conversations", model: "mistral/mistral-large-latest" },
] as const;

describe("the built reference harness and its sources on every transport", () => {
  let provider: ScriptedProvider;
  beforeAll(async () => {
    provider = await startScriptedProvider();
  });
  afterAll(async () => {
    await provider?.close();
  });

  async function outcomes(command: string[]) {
    const out: { api: string; status: string; code?: string; requests: { method: string; path: string }[] }[] = [];
    for (const t of TRANSPORTS) {
      const { hp } = await startHarness({ command });
      try {
        await ok(hp, { op: "init", protocol: 1, providers: { [t.prefix]: { key: "k", base_url: provider.url, api: t.api } } });
        const log = new EventLog(hp, "s");
        await ok(hp, { op: "open", session: "s", model: t.model, tools: [] });
        const before = provider.requests.length;
        await ok(hp, { op: "run", session: "s", turn: "t", text: `[[deltas 2]] via ${t.api}` });
        const end = await log.next("turn.end");
        const requests = provider.requests.slice(before).map((r) => ({ method: r.method, path: r.path }));
        out.push({ api: t.api, status: end.status, code: end.error?.code, requests });
      } finally {
        await hp.kill();
      }
    }
    return out;
  }

  it("sends the same requests and ends each turn the same way", { timeout: 60_000 }, async () => {
    const built = await outcomes([...REFERENCE_HARNESS_COMMAND]);
    const sources = await outcomes(["node", "runner-host/reference-harness/main.ts"]);
    expect(built).toEqual(sources);
    // Every transport reached the provider, and the OpenAI-compatible one completed.
    for (const o of built) expect(o.requests.length, o.api).toBeGreaterThan(0);
    expect(built[0]).toMatchObject({ status: "completed" });
  });
});
