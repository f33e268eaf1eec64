/**
 * The client both host tool transports send through (http-tool.ts, and the MCP SDK by way of
 * mcp-fetch.ts): Node's own HTTP client behind the fetch signature (../http-fetch.ts), its
 * connections kept alive between calls as the built-in fetch's are. Not the built-in fetch: it
 * fails any request or body silent for 300 s (undici's `headersTimeout`/`bodyTimeout`), so a tool
 * with a longer `timeout_seconds` answering later was cut off as dropped. Here only the call's own
 * budget (CallBudget) ends a silent call; the client's bound lies past the longest timeout. What
 * this client does not take (a Request object, a streamed body) goes to the built-in fetch.
 */
import { httpFetch } from "../http-fetch.ts";
import { TOOL_TIMEOUT_SECONDS } from "../../src/shared/config-tools.ts";

/** No bytes either way for this long fails a request, ms: past the longest `timeout_seconds`. */
export const TOOL_CLIENT_SILENCE_MS = (TOOL_TIMEOUT_SECONDS.max + 60) * 1000;
/** Keep-alive of an idle connection between calls, ms: the built-in fetch's (servers often close at 5 s). */
const IDLE_MS = 4_000;

export const toolFetch = httpFetch((input, init) => fetch(input, init), { idleMs: IDLE_MS, silenceMs: TOOL_CLIENT_SILENCE_MS });
