/**
 * Runs the `agents` peer (worker.ts) in Miniflare, in its own process so neither Miniflare's Node
 * side nor esbuild shares the bench client's event loop; workerd is Miniflare's child.
 *
 *   node bench/peers/agents/serve.ts --provider <url ending in /v1> --dir <empty dir>
 *
 * Prints `{"event":"listening","url":...}` on stdout once the Worker answers; stops on
 * SIGTERM/SIGINT. `--dir` holds the Durable Objects' SQLite files; the caller deletes it.
 */
import { build } from "esbuild";
import { builtinModules } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { WORKER_BUILD } from "../../../runner-host/cli/worker-bundle.ts";

const { values } = parseArgs({ options: { provider: { type: "string" }, dir: { type: "string" } } });
if (!values.provider || !values.dir) throw new Error("--provider and --dir are required");

/** The Worker's platform settings: a current date, and Node built-ins the AI SDK and agents import. */
const COMPATIBILITY_DATE = "2026-11-01";
const COMPATIBILITY_FLAGS = ["nodejs_compat"];

const out = await build({
  ...WORKER_BUILD,
  entryPoints: [fileURLToPath(new URL("worker.ts", import.meta.url))],
  external: ["cloudflare:*", "node:*", ...builtinModules],
  sourcemap: false,
  logLevel: "error",
});

const mf = new Miniflare({
  ...convertV4MiniflareOptions({
  modulesRoot: values.dir,
  modules: [{ type: "ESModule", path: path.join(values.dir, "worker.mjs"), contents: out.outputFiles[0]!.text }],
  compatibilityDate: COMPATIBILITY_DATE,
  compatibilityFlags: COMPATIBILITY_FLAGS,
  durableObjects: { ChatAgent: { className: "ChatAgent", useSQLite: true } },
  bindings: { PROVIDER_URL: values.provider },
  cf: false,
  // Miniflare's request log would POST a line back to this process for every request.
  logRequests: false,
  host: "127.0.0.1",
  port: 0,
  }),
  resourcePersistencePath: values.dir,
});
const url = (await mf.ready).href.replace(/\/$/, "");
process.stdout.write(`${JSON.stringify({ event: "listening", url })}\n`);
const stop = () => void mf.dispose().finally(() => process.exit(0));
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
