/**
 * Bundles the Worker (src/index.ts) for Miniflare at start-up, so the local stack needs no build
 * step: esbuild takes ~100 ms and the output stays in memory. The compatibility date, flags and
 * Durable Object bindings below must equal wrangler.toml, which `wrangler deploy` and the workers
 * test pool read for the same code; test/unit/wrangler-config.test.ts fails when they drift apart.
 */
import { build, stop, type BuildOptions, type Plugin } from "esbuild";
import { builtinModules } from "node:module";
import { fileURLToPath } from "node:url";

export const COMPATIBILITY_DATE = "2026-11-01";
export const COMPATIBILITY_FLAGS = ["enable_request_signal", "nodejs_compat"];

/**
 * CommonJS dependencies (pg, for the Postgres mirror) `require("events")` and the like; in an ESM
 * bundle esbuild can only turn that into a dynamic require, which workerd lacks. Each bare builtin
 * becomes a small ESM module re-exporting `node:<name>` (nodejs_compat), required like any other.
 * `wrangler deploy` does the same with its own bundler.
 */
const BARE_BUILTIN = new RegExp(`^(${builtinModules.filter((m) => !m.startsWith("_")).join("|").replace(/\//g, "\\/")})$`);
const nodeBuiltins: Plugin = {
  name: "node-builtins",
  setup(b) {
    b.onResolve({ filter: BARE_BUILTIN }, (a) => ({ path: a.path, namespace: "node-builtin" }));
    b.onLoad({ filter: /.*/, namespace: "node-builtin" }, (a) => ({
      contents: `import * as m from "node:${a.path}"; export default m.default ?? m; export * from "node:${a.path}";`,
      loader: "js",
    }));
  },
};

const ENTRY = fileURLToPath(new URL("../../src/index.ts", import.meta.url));

/** How any Worker is bundled for workerd: one ES module in memory, workerd's export conditions. */
export const WORKER_BUILD = {
  bundle: true,
  write: false,
  format: "esm",
  platform: "neutral",
  target: "es2024",
  mainFields: ["module", "main"],
  conditions: ["workerd", "worker", "browser"],
} satisfies BuildOptions & { write: false };

export async function bundleWorker(): Promise<string> {
  const out = await build({
    ...WORKER_BUILD,
    entryPoints: [ENTRY],
    external: ["cloudflare:*", "node:*"],
    loader: { ".sql": "text" },
    plugins: [nodeBuiltins],
    sourcemap: false,
    logLevel: "silent",
  });
  // esbuild's service child otherwise lives as long as this process and wakes ~60 times a second
  // while the stack is idle (measured: context switches over 10 s). A later build starts it again.
  await stop();
  return out.outputFiles[0]!.text;
}
