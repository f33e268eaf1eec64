/**
 * The LangGraph peer: the LangGraph JS in-memory dev server (serve.ts in ./langgraph) running a
 * one-node `StateGraph(MessagesAnnotation)` whose streaming `ChatOpenAI` reads the scripted
 * provider; driven over its HTTP API by the benches' own client (lib.ts `sse`).
 *
 * A turn is `POST /threads/{id}/runs/stream` with `stream_mode: ["messages-tuple"]` — the
 * per-token mode (the `messages` mode resends the whole message so far with every token) — read
 * to the end of the response. Text = the non-empty `content` of each `messages` event.
 * What the dev server does that shows in the figures (read from its source):
 *   - a run waits for one of its run workers' polls (each sleeps up to 1 s between polls) before it
 *     starts: most of its first-output time;
 *   - its stream ends only when a 500 ms read timeout fires after the run is over, so "end" (stream
 *     closed) carries that tail; `lastMs` (last token) does not.
 * Offline: tracing and analytics off, no API keys; the server makes no other network calls.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { atCleanup, now, request, sse, startServerProcess, type Turn } from "../lib.ts";

/** The dev server's environment: no LangSmith tracing, no analytics, JSON log lines. */
const OFFLINE_ENV = {
  LANGSMITH_TRACING: "false",
  LANGSMITH_TRACING_V2: "false",
  LANGCHAIN_TRACING: "false",
  LANGCHAIN_TRACING_V2: "false",
  LANGCHAIN_CALLBACKS_BACKGROUND: "false",
  LANGGRAPH_CLI_NO_ANALYTICS: "1",
  LANGSMITH_API_KEY: "",
  LANGCHAIN_API_KEY: "",
  OPENAI_API_KEY: "sk-bench",
  LOG_JSON: "true",
};
/** Run workers of the server: the `langgraphjs dev` default (`--n-jobs-per-worker`). */
export const LANGGRAPH_WORKERS = 10;

export async function startLangGraph(providerUrl: string) {
  const dir = mkdtempSync(path.join(tmpdir(), "bench-langgraph-"));
  atCleanup(() => rmSync(dir, { recursive: true, force: true })); // runs after the server stopped
  const server = await startServerProcess("langgraph dev server", ["bench/peers/langgraph/serve.ts", "--provider", providerUrl, "--dir", dir, "--workers", String(LANGGRAPH_WORKERS)], OFFLINE_ENV);
  const { url } = server;
  return {
    pid: server.pid,
    /** The end of the server's log (JSON lines). */
    logTail: server.tail,
    async thread(): Promise<string> {
      const r = await request("POST", `${url}/threads`, {});
      if (r.status !== 200 || typeof r.body?.thread_id !== "string") throw new Error(`langgraph: create thread: HTTP ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.thread_id;
    },
    /** One run on the thread, read to the end of its stream. */
    async turn(thread: string, text: string): Promise<Turn> {
      const parts: string[] = [];
      let first = NaN;
      let last = NaN;
      let error: string | undefined;
      const t0 = now();
      const body = { assistant_id: "agent", input: { messages: [{ role: "user", content: text }] }, stream_mode: ["messages-tuple"] };
      const h = sse("POST", `${url}/threads/${thread}/runs/stream`, body, {}, (event, data, t) => {
        if (event === "messages") {
          const content = JSON.parse(data)[0]?.content;
          if (typeof content === "string" && content.length > 0) {
            if (parts.length === 0) first = t;
            last = t;
            parts.push(content);
          }
        } else if (event === "error") error = data;
      });
      const { tEnd } = await h.done;
      if (error) throw new Error(`langgraph run failed: ${error.slice(0, 300)}`);
      return { firstMs: first - t0, lastMs: last - t0, endMs: tEnd - t0, text: parts.join("") };
    },
  };
}
export type LangGraph = Awaited<ReturnType<typeof startLangGraph>>;
