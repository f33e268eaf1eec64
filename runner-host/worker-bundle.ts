/**
 * Bundles the Worker (src/index.ts) for Miniflare at start-up, so the local stack needs no build
 * step: esbuild takes ~100 ms and the output stays in memory. Settings mirror wrangler.toml, which
 * `wrangler deploy` uses for the same code (test/unit/worker-bundle.test.ts keeps them in step).
 */
import { build } from "esbuild";
import { fileURLToPath } from "node:url";

export const COMPATIBILITY_DATE = "2026-11-01";
export const COMPATIBILITY_FLAGS = ["enable_request_signal", "nodejs_compat"];
export const DURABLE_OBJECTS = {
  SESSIONS: "SessionObject",
  TENANTS: "TenantObject",
  RUNNERS: "RunnerPool",
  SYNC_BACKLOG: "SyncBacklog",
} as const;

const ENTRY = fileURLToPath(new URL("../src/index.ts", import.meta.url));

export async function bundleWorker(): Promise<string> {
  const out = await build({
    entryPoints: [ENTRY],
    bundle: true,
    write: false,
    format: "esm",
    platform: "neutral",
    target: "es2024",
    mainFields: ["module", "main"],
    conditions: ["workerd", "worker", "browser"],
    external: ["cloudflare:*", "node:*"],
    loader: { ".sql": "text" },
    sourcemap: false,
    logLevel: "silent",
  });
  return out.outputFiles[0]!.text;
}
