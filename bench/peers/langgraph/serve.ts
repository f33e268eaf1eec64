/**
 * The LangGraph JS in-memory dev server (the server `langgraphjs dev` runs), started the way the
 * CLI's own entry point starts it — `startServer` of `@langchain/langgraph-api` — minus the CLI's
 * file watcher and its parent IPC. Runs in its own process so it never shares the bench client's
 * event loop.
 *
 *   node bench/peers/langgraph/serve.ts --provider <url ending in /v1> --dir <empty dir> [--workers 10]
 *
 * Prints `{"event":"listening","url":...}` on stdout once HTTP is served; stops on SIGTERM/SIGINT.
 * `--dir` holds the dev server's file-backed store (`.langgraph_api/`); the caller deletes it.
 */
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";

const { values } = parseArgs({ options: { provider: { type: "string" }, dir: { type: "string" }, workers: { type: "string", default: "10" } } });
if (!values.provider || !values.dir) throw new Error("--provider and --dir are required");
process.env.PROVIDER_URL = values.provider;
// The dev server reads these at import time, so they are set before it is imported.
const { startServer } = await import("@langchain/langgraph-api/server");
const { host, cleanup } = await startServer({
  port: 0,
  host: "127.0.0.1",
  nWorkers: Number(values.workers),
  cwd: values.dir,
  graphs: { agent: `${fileURLToPath(new URL("graph.ts", import.meta.url))}:graph` },
});
process.stdout.write(`${JSON.stringify({ event: "listening", url: `http://${host}` })}\n`);
const stop = () => void cleanup().finally(() => process.exit(0));
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
