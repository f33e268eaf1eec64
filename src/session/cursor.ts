/**
 * Cursor codec. A cursor names a position in one session's event log: the log epoch (bumped by a
 * restore that cuts history) and the `seq` of the last event the client has. It carries a MAC
 * keyed per session, so a fabricated cursor, an event id, or another session's cursor all fail to
 * decode and become `409 cursor_unavailable`.
 *
 * Layout (base64url, no padding): version(1) | epoch(u32 BE) | seq(u48 BE) | HMAC-SHA256[0..16).
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { fromBase64Url, toBase64Url } from "../shared/base64.ts";

const VERSION = 1;
const PAYLOAD_BYTES = 1 + 4 + 6;
/** Truncated MAC length, bytes: 128 bits is plenty against guessing and keeps cursors at 36 chars. */
const MAC_BYTES = 16;
/** Longer cursors are rejected before any decoding (docs/api.md "Cursors"). */
export const MAX_CURSOR_BYTES = 512;

export type Position = { epoch: number; seq: number };

export function encodeCursor(key: string, pos: Position): string {
  const payload = new Uint8Array(PAYLOAD_BYTES);
  const view = new DataView(payload.buffer);
  view.setUint8(0, VERSION);
  view.setUint32(1, pos.epoch);
  view.setUint16(5, Math.floor(pos.seq / 2 ** 32));
  view.setUint32(7, pos.seq % 2 ** 32);
  const mac = createHmac("sha256", key).update(payload).digest().subarray(0, MAC_BYTES);
  const all = new Uint8Array(PAYLOAD_BYTES + MAC_BYTES);
  all.set(payload);
  all.set(mac, PAYLOAD_BYTES);
  return toBase64Url(all);
}

/** Returns the position, or undefined for anything that is not a cursor this key issued. */
export function decodeCursor(key: string, cursor: string): Position | undefined {
  if (cursor.length > MAX_CURSOR_BYTES || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  const all = fromBase64Url(cursor);
  if (!all || all.length !== PAYLOAD_BYTES + MAC_BYTES) return undefined;
  const payload = all.subarray(0, PAYLOAD_BYTES);
  const mac = createHmac("sha256", key).update(payload).digest().subarray(0, MAC_BYTES);
  if (!timingSafeEqual(mac, all.subarray(PAYLOAD_BYTES))) return undefined;
  const view = new DataView(payload.buffer, payload.byteOffset, PAYLOAD_BYTES);
  if (view.getUint8(0) !== VERSION) return undefined;
  return { epoch: view.getUint32(1), seq: view.getUint16(5) * 2 ** 32 + view.getUint32(7) };
}
