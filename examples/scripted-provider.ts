/**
 * A scripted OpenAI-compatible provider for tests and the local demo: no network, no keys.
 * Serves `POST /v1/chat/completions`, streaming (SSE `data:` chunks, a usage chunk when
 * `stream_options.include_usage`, then `data: [DONE]`) and non-streaming. Every request is recorded
 * (method, path, lower-cased headers incl. authorization, parsed body) so a test can assert the
 * exact conversation a turn sent — unless started with `record: false`, as `npm start` and the CLI
 * are: a recorded request keeps its whole conversation, so a long-running server would grow with
 * every turn of every session it ever served.
 *
 * Directive language — directives are read from the text of the LAST user message:
 *   [[deltas N size=K]]     reply with N text deltas of K characters each (K defaults to 4);
 *                           delta i is the letter `a`+(i mod 26) repeated K times
 *   [[ttft MS]]             wait MS milliseconds before the first token
 *   [[delay MS]]            wait MS milliseconds between tokens
 *   [[tool NAME {JSON}]]    stream a call of tool NAME with those arguments (repeatable: parallel
 *                           calls; ids `call_<request>_<i>`; the JSON must not contain "]]")
 *   [[error STATUS msg]]    answer HTTP STATUS with an OpenAI-shaped error body (message defaults
 *                           per status, e.g. 401 → "Incorrect API key provided"); `{key}` in msg
 *                           becomes the bearer the request carried (a provider quoting the key)
 *   [[hang]]                send the role chunk, then nothing until the client disconnects
 *   [[hold NAME]]           answer (whatever the answer is) only once `release(NAME)` was called:
 *                           a test holds a turn at the provider until it did what must come first
 *   [[usage prompt=P cached=C completion=O]]   report these token counts (OpenAI semantics:
 *                           prompt includes cached); default prompt = 10 × messages, cached 0,
 *                           completion = number of deltas
 *   [[finish REASON]]       finish_reason for a text reply (default `stop`; e.g. `length`)
 *   [[cut]]                 end the event stream after the deltas, with no finish_reason chunk and
 *                           no `[DONE]` (a stream cut short cleanly); `[[cut done]]` sends `[DONE]`
 *   [[json]]                answer a streaming request with one whole JSON reply, not a stream
 *   [[call-id-chars N]]     every tool call's id is N characters (`c` repeated; 0: an empty id,
 *                           as some OpenAI-compatible servers send) instead of `call_<request>_<i>`
 *   [[units K]]             the echo reply in deltas of K UTF-16 units, not words (K 1: every
 *                           surrogate pair split between two chunks, each half a lone escape)
 * Without directives the reply is `echo: <text>` in a few word-sized deltas (directives are
 * stripped from the echoed text).
 * A request whose assistant tool calls are not all answered by tool messages is refused with 400,
 * as the real API does, so tests catch an invalid transcript.
 * When the request's last message is a tool result, the reply quotes the trailing tool results
 * (`tool get_weather returned: {...}`) and only ttft/delay/usage still apply.
 *
 * CLI: `node examples/scripted-provider.ts --port 8791 [--host 127.0.0.1]` prints one JSON line
 * `{"event":"listening","url":...}` on stdout and runs until SIGINT/SIGTERM.
 */
import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: any;
  /** `performance.now()` when the request arrived and when its response was fully written. */
  receivedAt: number;
  finishedAt?: number;
}

export interface ScriptedProvider {
  /** Base URL ending in `/v1`, for a provider's `base_url`. */
  url: string;
  port: number;
  requests: RecordedRequest[];
  waitForRequests(n: number, timeoutMs?: number): Promise<RecordedRequest[]>;
  /** Lets requests held by `[[hold NAME]]` answer, now and from now on. */
  release(name: string): void;
  close(): Promise<void>;
}

/** Default wait of `waitForRequests`, ms. */
const DEFAULT_WAIT_MS = 5_000;
/** Fixed `created` timestamp, seconds: replies are byte-for-byte deterministic. */
const CREATED = 1_700_000_000;
const ERROR_DEFAULTS: Record<number, [string, string]> = {
  400: ["Bad request", "invalid_request_error"],
  401: ["Incorrect API key provided", "invalid_request_error"],
  403: ["Forbidden", "invalid_request_error"],
  429: ["Rate limit reached", "rate_limit_error"],
  500: ["The server had an error", "server_error"],
  503: ["Service unavailable", "server_error"],
};

interface Script {
  deltas: string[];
  tools: { name: string; args: string }[];
  ttft: number;
  delay: number;
  error?: { status: number; message: string };
  hang: boolean;
  hold?: string;
  usage?: { prompt: number; cached: number; completion: number };
  finish: string;
  callIdChars?: number;
  /** `[[cut]]`: "bare" (nothing after the deltas) or "done" (`[DONE]` only). */
  cut?: "bare" | "done";
  json?: boolean;
}

/** `record`: keep every request for `requests` and `waitForRequests` (default true). */
export async function startScriptedProvider(opts: { host?: string; port?: number; record?: boolean } = {}): Promise<ScriptedProvider> {
  const record = opts.record ?? true;
  const requests: RecordedRequest[] = [];
  let served = 0;
  const waiters = new Set<() => void>();
  /** `[[hold NAME]]` gates: released names, and the requests waiting for one. */
  const released = new Set<string>();
  const held = new Map<string, Set<() => void>>();
  const heldUntil = (name: string, res: ServerResponse) =>
    new Promise<boolean>((resolve) => {
      if (released.has(name)) return resolve(true);
      const go = () => resolve(true);
      const set = held.get(name) ?? new Set();
      held.set(name, set.add(go));
      res.on("close", () => (set.delete(go), resolve(false)));
    });
  const server = createServer((req, res) => {
    void handle(req, res).catch((err: Error) => {
      if (!res.headersSent) sendError(res, 500, `scripted provider failed: ${err.message}`);
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const receivedAt = performance.now();
    let rec: RecordedRequest | undefined;
    res.on("finish", () => {
      if (rec) rec.finishedAt = performance.now();
    });
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    let body: any = raw;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      // recorded as the raw string
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(", ") : v;
    const n = ++served;
    if (record) {
      rec = { method: req.method ?? "", path: req.url ?? "", headers, body, receivedAt };
      requests.push(rec);
      for (const w of waiters) w();
    }
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") return sendError(res, 404, `no route ${req.method} ${req.url}`);
    if (!body || typeof body !== "object" || !Array.isArray(body.messages)) return sendError(res, 400, "messages is required");
    const orphan = orphanedToolCall(body.messages);
    if (orphan) return sendError(res, 400, `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. Missing: ${orphan}`);
    const script = buildScript(body.messages);
    if (script.error) script.error.message = script.error.message.replaceAll("{key}", (headers.authorization ?? "").replace(/^Bearer\s+/i, ""));
    if (script.hold !== undefined && !(await heldUntil(script.hold, res))) return; // the client left first
    await reply(res, body, script, n);
  }

  server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1");
  await once(server, "listening");
  const { port, address } = server.address() as AddressInfo;
  const host = address.includes(":") ? `[${address}]` : address;
  return {
    url: `http://${host}:${port}/v1`,
    port,
    requests,
    waitForRequests(count, timeoutMs = DEFAULT_WAIT_MS) {
      if (!record) return Promise.reject(new Error("this scripted provider was started with record: false"));
      return new Promise((resolveWait, rejectWait) => {
        const check = () => {
          if (requests.length < count) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolveWait(requests.slice());
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          rejectWait(new Error(`waited ${timeoutMs} ms for ${count} requests, got ${requests.length}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    release(name) {
      released.add(name);
      for (const go of held.get(name) ?? []) go();
      held.delete(name);
    },
    async close() {
      server.closeAllConnections(); // ends [[hang]] streams too
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * Like the real API, refuse a conversation whose assistant tool calls are not each answered by a
 * tool message before the next non-tool message: a transcript with an orphaned call is invalid.
 */
function orphanedToolCall(messages: { role?: string; tool_calls?: { id?: string }[]; tool_call_id?: string }[]): string | undefined {
  for (let i = 0; i < messages.length; i++) {
    const calls = messages[i]?.role === "assistant" ? (messages[i]!.tool_calls ?? []) : [];
    const answered = new Set<string>();
    for (let j = i + 1; j < messages.length && messages[j]?.role === "tool"; j++) answered.add(messages[j]!.tool_call_id ?? "");
    const missing = calls.find((c) => !answered.has(c.id ?? ""));
    if (missing) return missing.id ?? "?";
  }
  return undefined;
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((p: { type?: string; text?: string }) => (p?.type === "text" ? (p.text ?? "") : "")).join("");
}

function buildScript(messages: any[]): Script {
  const lastUser = [...messages].reverse().find((m) => m?.role === "user");
  const text = textOf(lastUser?.content);
  const script: Script = { deltas: [], tools: [], ttft: 0, delay: 0, hang: false, finish: "stop" };
  let deltasCount = -1;
  let deltaSize = 4;
  let unitSize = 0;
  for (const [, name, argText] of text.matchAll(/\[\[([a-z-]+)(.*?)\]\]/gs)) {
    const arg = (argText ?? "").trim();
    const num = (k: string, d: number) => Number(new RegExp(`${k}=(\\d+)`).exec(arg)?.[1] ?? d);
    if (name === "deltas") [deltasCount, deltaSize] = [Number.parseInt(arg, 10) || 0, num("size", 4)];
    else if (name === "ttft") script.ttft = Number.parseInt(arg, 10) || 0;
    else if (name === "delay") script.delay = Number.parseInt(arg, 10) || 0;
    else if (name === "hang") script.hang = true;
    else if (name === "hold") script.hold = arg;
    else if (name === "finish") script.finish = arg || "stop";
    else if (name === "call-id-chars") script.callIdChars = Number.parseInt(arg, 10) || 0;
    else if (name === "cut") script.cut = arg === "done" ? "done" : "bare";
    else if (name === "json") script.json = true;
    else if (name === "units") unitSize = Number.parseInt(arg, 10) || 1;
    else if (name === "usage") script.usage = { prompt: num("prompt", 0), cached: num("cached", 0), completion: num("completion", 0) };
    else if (name === "tool") {
      const sp = arg.search(/\s/);
      script.tools.push({ name: sp === -1 ? arg : arg.slice(0, sp), args: sp === -1 ? "{}" : arg.slice(sp + 1).trim() });
    } else if (name === "error") {
      const m = /^(\d{3})\s*(.*)$/s.exec(arg);
      script.error = { status: Number(m?.[1] ?? 500), message: m?.[2] ?? "" };
    }
  }
  const last = messages[messages.length - 1];
  if (last?.role === "tool") {
    // Follow-up after tool results: quote them; tool/error/hang/deltas of the user text no longer apply.
    const results: string[] = [];
    for (let i = messages.length - 1; i >= 0 && messages[i]?.role === "tool"; i--) {
      const m = messages[i];
      const call = messages.flatMap((x: any) => x?.tool_calls ?? []).find((c: any) => c?.id === m.tool_call_id);
      results.unshift(`tool ${call?.function?.name ?? m.tool_call_id} returned: ${textOf(m.content)}`);
    }
    return { ...script, tools: [], hang: false, hold: undefined, error: undefined, cut: undefined, json: undefined, finish: "stop", deltas: words(results.join("; ")) };
  }
  if (deltasCount >= 0) {
    script.deltas = Array.from({ length: deltasCount }, (_, i) => String.fromCharCode(97 + (i % 26)).repeat(deltaSize));
  } else if (script.tools.length === 0) {
    const echo = `echo: ${text.replace(/\[\[[a-z-]+.*?\]\]/gs, "").trim()}`;
    script.deltas = unitSize > 0 ? Array.from({ length: Math.ceil(echo.length / unitSize) }, (_, i) => echo.slice(i * unitSize, (i + 1) * unitSize)) : words(echo);
  }
  return script;
}

/** "a b c" → ["a", " b", " c"]: a few deltas whose concatenation is the text. */
function words(text: string): string[] {
  return text.split(/(?= )/).filter((w) => w.length > 0);
}

function sendError(res: ServerResponse, status: number, message?: string): void {
  const [defMessage, type] = ERROR_DEFAULTS[status] ?? ["Error", status >= 500 ? "server_error" : "invalid_request_error"];
  const code = status === 401 ? "invalid_api_key" : null;
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ error: { message: message || defMessage, type, param: null, code } }));
}

async function reply(res: ServerResponse, body: any, script: Script, n: number): Promise<void> {
  if (script.error) return sendError(res, script.error.status, script.error.message);
  const gone = new AbortController();
  res.on("close", () => gone.abort());
  const wait = async (ms: number) => {
    if (ms > 0) await sleep(ms, undefined, { signal: gone.signal }).catch(() => {});
  };
  const untilGone = async () => {
    if (!gone.signal.aborted) await once(gone.signal, "abort");
  };
  const finish = script.tools.length > 0 ? "tool_calls" : script.finish;
  const usage = usageOf(script, body.messages.length);
  const id = `chatcmpl-scripted-${n}`;
  const callId = (i: number) => (script.callIdChars === undefined ? `call_${n}_${i}` : "c".repeat(script.callIdChars));

  if (body.stream !== true || script.json) {
    if (script.hang) return untilGone();
    await wait(script.ttft);
    const message: Record<string, unknown> = { role: "assistant", content: script.deltas.join("") || null };
    if (script.tools.length) {
      message.tool_calls = script.tools.map((t, i) => ({ id: callId(i), type: "function", function: { name: t.name, arguments: t.args } }));
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ id, object: "chat.completion", created: CREATED, model: body.model, choices: [{ index: 0, message, finish_reason: finish }], usage }));
    return;
  }

  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  // Honour backpressure: a write that returns false waits for `drain` (or the client leaving).
  const send = async (payload: unknown) => {
    if (gone.signal.aborted) return;
    if (!res.write(`data: ${typeof payload === "string" ? payload : JSON.stringify(payload)}\n\n`)) {
      await new Promise<void>((done) => {
        const settle = () => {
          res.off("drain", settle);
          gone.signal.removeEventListener("abort", settle);
          done();
        };
        res.on("drain", settle);
        gone.signal.addEventListener("abort", settle);
      });
    }
  };
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
    id, object: "chat.completion.chunk", created: CREATED, model: body.model,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  });
  await send(chunk({ role: "assistant", content: "" }));
  if (script.hang) return untilGone();
  await wait(script.ttft);
  for (const [i, d] of script.deltas.entries()) {
    if (i > 0) await wait(script.delay);
    if (gone.signal.aborted) return;
    await send(chunk({ content: d }));
  }
  for (const [i, t] of script.tools.entries()) {
    await wait(script.delay);
    await send(chunk({ tool_calls: [{ index: i, id: callId(i), type: "function", function: { name: t.name, arguments: "" } }] }));
    const half = Math.ceil(t.args.length / 2); // two argument fragments, as real providers split them
    for (const part of [t.args.slice(0, half), t.args.slice(half)]) {
      if (part) await send(chunk({ tool_calls: [{ index: i, function: { arguments: part } }] }));
    }
  }
  if (script.cut) {
    if (script.cut === "done") await send("[DONE]");
    if (!gone.signal.aborted) res.end();
    return;
  }
  await send(chunk({}, finish));
  if (body.stream_options?.include_usage) await send({ id, object: "chat.completion.chunk", created: CREATED, model: body.model, choices: [], usage });
  await send("[DONE]");
  if (!gone.signal.aborted) res.end();
}

function usageOf(script: Script, messages: number) {
  const u = script.usage ?? { prompt: messages * 10, cached: 0, completion: script.deltas.length + script.tools.length };
  return {
    prompt_tokens: u.prompt,
    completion_tokens: u.completion,
    total_tokens: u.prompt + u.completion,
    prompt_tokens_details: { cached_tokens: u.cached },
  };
}

async function main(argv: string[]): Promise<void> {
  const arg = (name: string) => {
    const i = argv.indexOf(name);
    return i === -1 ? undefined : argv[i + 1];
  };
  const provider = await startScriptedProvider({ host: arg("--host"), port: Number(arg("--port") ?? 8791), record: false });
  process.stdout.write(`${JSON.stringify({ event: "listening", url: provider.url })}\n`);
  const stop = () => void provider.close().then(() => process.exit(0));
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  void main(process.argv.slice(2));
}
