/**
 * SSE frame encoder (docs/api.md "SSE"): retained events carry `id: <cursor>` before
 * `event:`; live-only events omit it; `data:` is the JSON envelope on one line (JSON.stringify never
 * emits a raw newline). Comment frames are used for keepalives.
 */
import type { Event } from "../shared/api-schema.ts";

const encoder = new TextEncoder();

/** `data: ` before the JSON envelope and the blank line after it, bytes. */
const FRAMING_BYTES = 8;

export type Frame = { bytes: Uint8Array; dataLength: number };

export function encodeEvent(e: Event): Frame {
  const data = JSON.stringify(e);
  const head = e.cursor !== undefined ? `id: ${e.cursor}\nevent: ${e.type}\n` : `event: ${e.type}\n`;
  const bytes = encoder.encode(`${head}data: ${data}\n\n`);
  // The data's byte length is what the frame's other parts leave: they are ASCII (a base64url
  // cursor, a type name of the event schema), so the data is not encoded a second time to count it.
  return { bytes, dataLength: bytes.length - head.length - FRAMING_BYTES };
}

export const KEEPALIVE = encoder.encode(": keepalive\n\n");
