/**
 * What every SSE stream the Worker serves shares besides its frames (the 15 s keepalive and write
 * deadline of docs/api.md "SSE"): event streams and executor command streams alike.
 */

/** A keepalive comment frame after 15 s without a write, ms. */
export const KEEPALIVE_MS = 15_000;
/** A frame the client has not taken 15 s after its write began ends the stream, ms. */
export const WRITE_DEADLINE_MS = 15_000;
/**
 * How often a stream looks at its keepalive and write deadline, ms: either is then met within a
 * second of its 15 s, a drift no client notices, for one timer wake-up a second per stream.
 */
export const STREAM_CHECK_MS = 1_000;

/**
 * The reason a cut stream's body is aborted with. The runtime reports an aborted response body as an
 * uncaught exception naming it (at the client's next read, for a client that stopped reading); the
 * local stack logs that report as the expected end it is (runner-host/cli/local-stack.ts).
 */
export const CUT_REASON = "subscriber disconnected";

/** Never cached, and never buffered by a proxy on the way (frames must reach the client as written). */
export const SSE_HEADERS = { "Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no" } as const;
