/**
 * SSE frame encoder (docs/api.md "SSE"): retained events carry `id: <cursor>` before
 * `event:`; live-only events omit it; `data:` is the JSON envelope on one line (JSON.stringify never
 * emits a raw newline). Comment frames are used for keepalives.
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
