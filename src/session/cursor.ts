/**
 * Cursor codec. A cursor names a position in one session's event log: the log epoch (bumped by a
 * restore that cuts history) and the `seq` of the last event the client has. It carries a MAC
 * keyed per session, so a fabricated cursor, an event id, or another session's cursor all fail to
 * decode and become `409 cursor_unavailable`.
 *
 * Layout (base64url, no padding): version(1) | epoch(u32 BE) | seq(u48 BE) | HMAC-SHA256[0..16).
 */
import { timingSafeEqual } from "node:crypto";
import { fromBase64Url, toBase64Url } from "../shared/base64.ts";
import { HmacSha256 } from "../shared/hmac-sha256.ts";

const VERSION = 1;
const PAYLOAD_BYTES = 1 + 4 + 6;
/** Truncated MAC length, bytes: 128 bits is plenty against guessing and keeps cursors at 36 chars. */
const MAC_BYTES = 16;
/** Longer cursors are rejected before any decoding (docs/api.md "Cursors"). */
export const MAX_CURSOR_BYTES = 512;

export type Position = { epoch: number; seq: number };

/**
 * Keys seen, each with its pads hashed once: a session's object makes a cursor for every event it
 * hands out, all under its session's key (when each set the key up again, ~6% of the objects' CPU
 * under load). One isolate runs many sessions' objects, hence a map; at this many keys it starts
 * over (~0.3 KiB each), so it never grows with the sessions an isolate has served.
 */
const MAX_KEYS = 1024;
const keyed = new Map<string, HmacSha256>();
const encoder = new TextEncoder();

function hmacOf(key: string): HmacSha256 {
  let hmac = keyed.get(key);
  if (!hmac) {
    if (keyed.size >= MAX_KEYS) keyed.clear();
    hmac = new HmacSha256(encoder.encode(key));
    keyed.set(key, hmac);
  }
  return hmac;
}

/** A cursor's bytes while it is made: one buffer for all (made and spelled without yielding). */
const CURSOR = new Uint8Array(PAYLOAD_BYTES + MAC_BYTES);

export function encodeCursor(key: string, pos: Position): string {
  const high = Math.floor(pos.seq / 2 ** 32);
  const low = pos.seq % 2 ** 32;
  CURSOR[0] = VERSION;
  CURSOR[1] = pos.epoch >>> 24;
  CURSOR[2] = pos.epoch >>> 16;
  CURSOR[3] = pos.epoch >>> 8;
  CURSOR[4] = pos.epoch;
  CURSOR[5] = high >>> 8;
  CURSOR[6] = high;
  CURSOR[7] = low >>> 24;
  CURSOR[8] = low >>> 16;
  CURSOR[9] = low >>> 8;
  CURSOR[10] = low;
  hmacOf(key).macInto(CURSOR, PAYLOAD_BYTES, CURSOR, PAYLOAD_BYTES, MAC_BYTES);
  return toBase64Url(CURSOR);
}

/** Returns the position, or undefined for anything that is not a cursor this key issued. */
export function decodeCursor(key: string, cursor: string): Position | undefined {
  if (cursor.length > MAX_CURSOR_BYTES || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  const all = fromBase64Url(cursor);
  if (!all || all.length !== PAYLOAD_BYTES + MAC_BYTES) return undefined;
  const payload = all.subarray(0, PAYLOAD_BYTES);
  if (!timingSafeEqual(hmacOf(key).mac(payload).subarray(0, MAC_BYTES), all.subarray(PAYLOAD_BYTES))) return undefined;
  const view = new DataView(payload.buffer, payload.byteOffset, PAYLOAD_BYTES);
  if (view.getUint8(0) !== VERSION) return undefined;
  return { epoch: view.getUint32(1), seq: view.getUint16(5) * 2 ** 32 + view.getUint32(7) };
}
