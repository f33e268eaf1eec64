/**
 * The wire rules every SSE stream shares (spec "SSE wire format"): retained events carry
 * `id: <cursor>` before `event:`; live-only events omit it; `data:` is the JSON envelope on one line
 * (JSON.stringify never emits a raw newline). Comment frames are used for keepalives.
 */
import type { Event } from "../shared/api-schema.ts";

const encoder = new TextEncoder();

export type Frame = { bytes: Uint8Array; dataLength: number };

export function encodeEvent(e: Event): Frame {
  const data = JSON.stringify(e);
  const head = e.cursor !== undefined ? `id: ${e.cursor}\nevent: ${e.type}\n` : `event: ${e.type}\n`;
  return { bytes: encoder.encode(`${head}data: ${data}\n\n`), dataLength: encoder.encode(data).length };
}

export const KEEPALIVE = encoder.encode(": keepalive\n\n");

/** Spec "SSE keepalive and write deadline": a keepalive after 15 s without a write, ms. */
export const KEEPALIVE_MS = 15_000;
/** Same rule: a frame the client has not taken 15 s after its write began ends the stream, ms. */
export const WRITE_DEADLINE_MS = 15_000;

/** Never cached, and never buffered by a proxy on the way (frames must reach the client as written). */
export const SSE_HEADERS = { "Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no" } as const;
