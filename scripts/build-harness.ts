/**
 * Builds the reference harness to plain JavaScript: `runner-host/reference-harness/dist/main.mjs`
 * and its chunks. The harness process then loads no `.ts` and far fewer modules (the measured
 * reasons are in bench/RESULTS.md "Reference harness memory, round 2"; the choices in
 * docs/design-notes.md "The reference harness is shipped built").
 *
 *   node scripts/build-harness.ts [--check]
 *
 * When it runs: on `npm ci`/`npm install` (`prepare`), before `npm start`, in the global setup of
 * the tests, at the start of every benchmark, and in the Dockerfile's build stage. Every run
 * bundles from the sources (under a second) and rewrites a file only when its bytes differ, so an
 * edited source is never run as an older build by any of them. `--check` writes nothing and exits
 * 1 when dist/ differs from what the sources build to.
 *
 * Layout / lifecycle of dist/: main.mjs (the entry) plus chunks/*.mjs named by content hash. New
 * chunks are written first and main.mjs last, each by an atomic rename, so a harness starting
 * meanwhile loads either the old build or the new one; files the new build no longer has are
 * then removed.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { isDeepStrictEqual } from "node:util";
import { build, stop, type BuildOptions, type Plugin } from "esbuild";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SRC = path.join(ROOT, "runner-host/reference-harness");
export const HARNESS_DIST = path.join(SRC, "dist");

/**
 * The reference harness command as examples/local.json gives it, relative to the repository root:
 * the built entry, under Node flags that keep the process small (docs/configuration.md "The
 * reference harness command"; measured in bench/RESULTS.md).
 */
export const REFERENCE_HARNESS_COMMAND: readonly string[] = ["node", "--single-threaded-gc", "--liftoff-only", "--expose-gc", "runner-host/reference-harness/dist/main.mjs"];

/**
 * Packages bundled into the harness; every other package stays an import from node_modules.
 * Bundled: what every harness process loads at start (pi-agent-core, pi-ai with its model catalog,
 * typebox, zod) and the clients of the transports a provider may use (`OVERRIDABLE_APIS`): as
 * hundreds of separate ES modules they cost several times their bundled size in memory, and
 * bundling drops what is never imported (most of typebox). pi-ai's provider modules become lazily
 * loaded chunks, so a process still loads only the clients its `init` can reach. Nothing outside
 * the bundle imports these packages in the harness process, so no module exists twice. Left
 * external, resolved from node_modules as before: Node built-ins and every other package (the AWS
 * SDK of the Bedrock transport; what the bundled SDKs load only for some calls, such as
 * google-auth-library).
 */
const BUNDLED = /^(@mariozechner\/pi-(ai|agent-core)|typebox|zod|partial-json|openai|@anthropic-ai\/sdk|@google\/genai|@mistralai\/mistralai)(\/|$)/;

/**
 * pi-ai loads its Bedrock client through `importNodeOnlyProvider("./amazon-bedrock.js")`, an
 * import with a computed specifier the bundler cannot follow; from a chunk in dist/ that relative
 * path would name nothing. Made a plain `import()`, it becomes a lazy chunk like the others. The
 * build fails if the line is gone (a pi-ai upgrade must be looked at, not silently mis-built).
 */
const BEDROCK_CALL = 'importNodeOnlyProvider("./amazon-bedrock.js")';

/** A bundled package no longer looks as a rewrite here expects: its upgrade is looked at, not mis-built. */
const reviewBuild = (file: string, what: string) => new Error(`${file}: ${what}; review scripts/build-harness.ts`);

/**
 * pi-ai's model catalog (~550 KB of source) is one object literal, which every harness process
 * parses at start: V8's parser holds ~2.9 MiB of compile memory for it at once, and in about one
 * process start in eight the C heap kept that peak for good (+4.3 MiB RSS; bench/RESULTS.md
 * "Twenty-second session"). Bundled as `JSON.parse` of one string literal, the same data is read
 * by the JSON parser, which builds the objects without that syntax tree. Only a catalog that is
 * exactly JSON data (`MODELS` and nothing else exported; no function, `undefined` or non-finite
 * number, checked by a round trip) is rewritten; anything else fails the build.
 */
const CATALOG = /@mariozechner\/pi-ai\/dist\/models\.generated\.js$/;
export async function catalogAsJson(file: string): Promise<string> {
  const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  const json = JSON.stringify(mod.MODELS);
  if (Object.keys(mod).join() !== "MODELS" || json === undefined || !isDeepStrictEqual(JSON.parse(json), mod.MODELS)) {
    throw reviewBuild(file, "not a catalog of plain JSON data");
  }
  return `export const MODELS = JSON.parse(${JSON.stringify(json)});\n`;
}

/**
 * zod's error messages in ~50 languages (267 KB of the 470 KB chunk every harness process loads).
 * Nothing in the harness or the libraries it bundles selects a locale (zod's own `config(en())`
 * imports English directly), so `z.locales` keeps English only. The build fails if zod's locale
 * index no longer exports `en` as this expects.
 */
const ZOD_LOCALES = /zod\/v4\/locales\/index\.js$/;
const ZOD_EN = 'export { default as en } from "./en.js";';

const packages: Plugin = {
  name: "harness-packages",
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (a) => (BUNDLED.test(a.path) ? undefined : { path: a.path, external: true }));
    b.onLoad({ filter: /@mariozechner\/pi-ai\/dist\/providers\/register-builtins\.js$/ }, (a) => {
      const text = readFileSync(a.path, "utf8");
      if (!text.includes(BEDROCK_CALL)) throw reviewBuild(a.path, `${BEDROCK_CALL} not found`);
      return { contents: text.replace(BEDROCK_CALL, 'import("./amazon-bedrock.js")'), loader: "js" };
    });
    b.onLoad({ filter: CATALOG }, async (a) => ({ contents: await catalogAsJson(a.path), loader: "js" }));
    b.onLoad({ filter: ZOD_LOCALES }, (a) => {
      if (!readFileSync(a.path, "utf8").split("\n").includes(ZOD_EN)) throw reviewBuild(a.path, `${ZOD_EN} not found`);
      return { contents: `${ZOD_EN}\n`, loader: "js" };
    });
  },
};

export const BUILD_OPTIONS: BuildOptions = {
  entryPoints: { main: path.join(SRC, "main.ts") },
  outdir: HARNESS_DIST,
  outExtension: { ".js": ".mjs" },
  chunkNames: "chunks/[name]-[hash]",
  bundle: true,
  splitting: true, // lazy provider chunks; modules they share with the entry are loaded once
  format: "esm",
  platform: "node",
  target: "node24",
  // Smaller source text held by V8 for the life of the process; names kept so error and class
  // names read as in the sources.
  minify: true,
  keepNames: true,
  legalComments: "none",
  plugins: [packages],
  write: false,
  logLevel: "error",
};

/** Bundles the harness in memory: path relative to dist/ → text. */
export async function bundleHarness(): Promise<Map<string, string>> {
  const result = await build(BUILD_OPTIONS);
  // The service child would otherwise stay for the caller's whole life, waking ~60 times a second
  // (a bench's client process among them); a later build starts it again.
  await stop();
  return new Map(result.outputFiles!.map((f) => [path.relative(HARNESS_DIST, f.path), f.text]));
}

const read = (file: string): string | undefined => {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
};

function listDist(dir = HARNESS_DIST, prefix = ""): string[] {
  let entries: import("node:fs").Dirent[] = [];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e; // not built yet: nothing listed
  }
  return entries.flatMap((e) => (e.isDirectory() ? listDist(path.join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`]));
}

/** Files of dist/ that differ from a fresh build, or that it would remove. */
export async function staleFiles(): Promise<string[]> {
  const built = await bundleHarness();
  const differ = [...built].filter(([name, text]) => read(path.join(HARNESS_DIST, name)) !== text).map(([n]) => n);
  return [...differ, ...listDist().filter((n) => !built.has(n))];
}

/** Builds dist/ from the sources; returns the files written or removed. */
export async function buildHarness(): Promise<string[]> {
  const built = await bundleHarness();
  const changed: string[] = [];
  const order = [...built.keys()].sort((a, b) => Number(a === "main.mjs") - Number(b === "main.mjs"));
  for (const name of order) {
    const file = path.join(HARNESS_DIST, name);
    const text = built.get(name)!;
    if (read(file) === text) continue;
    mkdirSync(path.dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, text);
    renameSync(tmp, file);
    changed.push(name);
  }
  for (const name of listDist()) {
    // Another build's temporary file is left to its own rename.
    if (built.has(name) || name.endsWith(".tmp")) continue;
    rmSync(path.join(HARNESS_DIST, name), { force: true });
    changed.push(`-${name}`);
  }
  return changed;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const where = path.relative(ROOT, HARNESS_DIST);
  if (process.argv.includes("--check")) {
    const stale = await staleFiles();
    if (stale.length) {
      process.stderr.write(`${where} is stale (${stale.join(", ")}); run: node scripts/build-harness.ts\n`);
      process.exit(1);
    }
    process.stderr.write(`${where} is up to date\n`);
  } else {
    const changed = await buildHarness();
    process.stderr.write(`${where}: ${changed.length ? `${changed.length} file(s) written or removed` : "up to date"}\n`);
  }
}
