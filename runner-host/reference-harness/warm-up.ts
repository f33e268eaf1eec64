/**
 * Warm-up of a freshly started harness process: one throwaway turn through the same code a real
 * turn runs (Session → pi-agent-core → pi-ai's openai-completions client → the harness's fetch
 * over Node's HTTP client → SSE parsing), against a canned chat completion served on a loopback
 * port inside this process.
 *
 * Why: a new process's first turn spent ~50 ms (p50, 2-core box) in lazy loading and unoptimized
 * code (fetch's first use, the SDK's request and stream machinery, the agent loop) on top of the
 * ~5 ms a later turn takes, and a spare process exists precisely so a new session does not wait.
 *
 * Nothing leaves the process: the server listens on 127.0.0.1 with an ephemeral port, the table
 * holds no real key, the session is never in the host's session map and its events are dropped,
 * so no output line is written. It runs once, after `init`, in the background; a real command
 * arriving meanwhile simply runs alongside. Only when the init table names an OpenAI-SDK transport
 * (the scripted provider and most OpenAI-compatible endpoints): for other transports the warm-up
 * would load a client the process never uses (memory), so they keep their cold first turn.
 */
import type { Server } from "node:http";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import type { ProviderConfig } from "../harness/protocol.ts";
import { Session, type RuntimeOptions } from "./session.ts";

/** Longest the warm-up may take, ms: it is best-effort and must never hold the process. */
const WARM_UP_TIMEOUT_MS = 5_000;
/** Throwaway turns: the second runs on code the first has warmed, so more of it gets optimized. */
const TURNS = 2;
/** Content chunks in the canned reply: enough for the delta path to be run more than once. */
const CHUNKS = 8;

/** Transports that go through the OpenAI SDK, i.e. whose first turn the canned reply warms. */
const OPENAI_SDK_APIS = new Set(["openai-completions", "openai-responses"]);

export function wantsWarmUp(apis: Set<string>): boolean {
  return [...apis].some((a) => OPENAI_SDK_APIS.has(a));
}

/** Runs the throwaway turn; resolves when it ended (or timed out). Never throws. */
export async function warmUp(options: RuntimeOptions): Promise<void> {
  const started = performance.now();
  let server: Server | undefined;
  let turns = 0;
  try {
    // Loaded here: a process whose transports are not warmed never needs an HTTP server.
    const { createServer } = await import("node:http");
    server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        const chunk = (delta: object, finish: string | null = null) =>
          `data: ${JSON.stringify({ id: "warm-up", object: "chat.completion.chunk", created: 0, model: "warm-up", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
        let body = chunk({ role: "assistant", content: "" });
        for (let i = 0; i < CHUNKS; i++) body += chunk({ content: "warm" });
        body += chunk({}, "stop");
        body += `data: ${JSON.stringify({ id: "warm-up", object: "chat.completion.chunk", created: 0, model: "warm-up", choices: [], usage: { prompt_tokens: 1, completion_tokens: CHUNKS, total_tokens: CHUNKS + 1 } })}\n\n`;
        res.end(`${body}data: [DONE]\n\n`);
      });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address() as AddressInfo;
    const providers: Record<string, ProviderConfig> = {
      openai: { key: "warm-up", base_url: `http://127.0.0.1:${port}/v1`, api: "openai-completions" },
    };
    let ended: () => void = () => {};
    const session = new Session(
      { op: "open", id: "warm-up", session: "warm-up", model: "openai/gpt-4o-mini", tools: [] },
      {
        emit: (e) => void (e.type === "turn.end" && ended()),
        keyFor: () => "warm-up",
        options: { ...options, maxRetries: 0 },
        providers,
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, WARM_UP_TIMEOUT_MS)));
    for (let i = 0; i < TURNS; i++) {
      const done = new Promise<void>((resolve) => (ended = resolve));
      session.run(`warm-up-${i}`, "warm up");
      if ((await Promise.race([done.then(() => "done"), late.then(() => "late")])) === "late") break;
      turns++;
    }
    clearTimeout(timer);
    session.interrupt();
  } catch {
    // Best-effort: a failed warm-up only leaves the first real turn as slow as it was.
  } finally {
    server?.closeAllConnections();
    server?.close();
    // One diagnostic line on stderr (the runner-host logs it): how long a new process spent here.
    process.stderr.write(`${JSON.stringify({ msg: "warm-up finished", turns, ms: Math.round(performance.now() - started) })}\n`);
  }
}
