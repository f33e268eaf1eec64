/**
 * The Cloudflare `agents` peer: an `AIChatAgent` Durable Object (agents/worker.ts, from
 * `@cloudflare/ai-chat`, the package `agents` moved its chat agent to) in Miniflare, streaming the
 * scripted provider through the AI SDK. One agent instance per name, as the package routes
 * `/agents/chat-agent/<name>`.
 *
 * Driven the way its own client (`useAgentChat` → `WebSocketChatTransport.sendMessages`) drives
 * it: one WebSocket per agent; a turn sends `cf_agent_use_chat_request` whose body carries the
 * client's whole transcript (`messages`: UI messages, the server replaces its stored transcript
 * with them) and `trigger: "submit-message"`; the reply arrives as `cf_agent_use_chat_response`
 * frames, each carrying one AI SDK UI-stream chunk (`start`, `text-delta`, …) as a JSON string,
 * and ends with the frame marked `done`. Text = the `delta` of each `text-delta` chunk. After the
 * turn the client adds the assistant message it built to its transcript, as the hook does.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import WebSocket from "ws";
import { atCleanup, now, startServerProcess, type Turn } from "../lib.ts";

type UiMessage = { id: string; role: "user" | "assistant"; parts: { type: string; text?: string; state?: string }[] };
type Pending = { id: string; t0: number; first: number; last: number; parts: string[]; messageId: string; done(end: number): void; fail(e: Error): void };

/** How long a turn may take before the bench gives up on it, ms (a 20,000-delta turn takes seconds). */
const TURN_TIMEOUT_MS = 120_000;

export async function startAgents(providerUrl: string) {
  const dir = mkdtempSync(path.join(tmpdir(), "bench-agents-"));
  atCleanup(() => rmSync(dir, { recursive: true, force: true })); // runs after the server stopped
  const server = await startServerProcess("agents in Miniflare", ["bench/peers/agents/serve.ts", "--provider", providerUrl, "--dir", dir]);
  const wsBase = server.url.replace(/^http/, "ws");
  return {
    pid: server.pid,
    /** The end of the server's output (Miniflare relays the Worker's console there). */
    logTail: server.tail,
    /** A chat client connected to the agent `name` (its own Durable Object). */
    async chat(name: string) {
      const ws = new WebSocket(`${wsBase}/agents/chat-agent/${encodeURIComponent(name)}`);
      atCleanup(() => ws.terminate());
      await new Promise<void>((resolve, reject) => (ws.once("open", () => resolve()), ws.once("error", reject)));
      const transcript: UiMessage[] = [];
      let seq = 0;
      let cur: Pending | undefined;
      ws.on("message", (raw: Buffer) => {
        const t = now();
        const frame = JSON.parse(raw.toString("utf8"));
        const c = cur;
        if (!c || frame.type !== "cf_agent_use_chat_response" || frame.id !== c.id) return;
        if (frame.error) return c.fail(new Error(`agents: turn failed: ${String(frame.body).slice(0, 300)}`));
        if (frame.body) {
          const chunk = JSON.parse(frame.body);
          if (chunk.type === "text-delta") {
            if (c.parts.length === 0) c.first = t;
            c.last = t;
            c.parts.push(chunk.delta);
          } else if (chunk.type === "start") c.messageId = chunk.messageId;
          else if (chunk.type === "error") return c.fail(new Error(`agents: stream error: ${String(chunk.errorText).slice(0, 300)}`));
        }
        if (frame.done) c.done(t);
      });
      ws.on("close", () => cur?.fail(new Error("agents: WebSocket closed during a turn")));
      return {
        close: () => ws.close(),
        /** One chat turn: the user message out, to the reply's `done` frame. */
        async turn(text: string): Promise<Turn> {
          const n = ++seq;
          transcript.push({ id: `u${n}`, role: "user", parts: [{ type: "text", text }] });
          const body = JSON.stringify({ messages: transcript, trigger: "submit-message" });
          let timer: NodeJS.Timeout | undefined;
          const p = new Promise<{ pending: Pending; end: number }>((resolve, reject) => {
            const pending: Pending = {
              id: `r${n}`,
              t0: now(),
              first: NaN,
              last: NaN,
              parts: [],
              messageId: `a${n}`,
              done: (end) => resolve({ pending, end }),
              fail: reject,
            };
            cur = pending;
            timer = setTimeout(() => reject(new Error(`agents: turn did not end within ${TURN_TIMEOUT_MS} ms`)), TURN_TIMEOUT_MS);
            ws.send(JSON.stringify({ id: pending.id, init: { method: "POST", body }, type: "cf_agent_use_chat_request" }));
          });
          try {
            const { pending, end } = await p;
            const reply = pending.parts.join("");
            transcript.push({ id: pending.messageId, role: "assistant", parts: [{ type: "step-start" }, { type: "text", text: reply, state: "done" }] });
            return { firstMs: pending.first - pending.t0, lastMs: pending.last - pending.t0, endMs: end - pending.t0, text: reply };
          } finally {
            clearTimeout(timer);
            cur = undefined;
          }
        },
      };
    },
  };
}
export type Agents = Awaited<ReturnType<typeof startAgents>>;
