/**
 * A provider's event stream goes to its SDK in pieces of about a kilobyte (./stream-end.ts relays
 * every successful event-stream answer through `pieces`).
 *
 * The OpenAI and Anthropic SDKs split what one read of the response body gave them into events by
 * copying the rest of that read once per event (`data = data.slice(i)`), so a read holding M
 * events of a stream costs them O(M × its length). A read is up to 64 KiB: a fast provider's
 * stream read by a process that fell behind (one busy turn, a second session) arrives in such
 * reads, which then cost the SDK more than everything else in the turn — so the process falls
 * further behind and its reads grow. Measured with one 20,000-delta turn: the harness spent ~65%
 * of its CPU in that copy, and its CPU per 1k deltas swung between ~38 and ~70 ms from run to run
 * (bench/RESULTS.md). Cut at line ends into pieces of at least PIECE_BYTES, each read of the SDK
 * costs O(piece), whatever the network gave.
 *
 * Any cut is correct: the SDKs join what a read leaves unfinished with the next one (a network
 * can split an event anywhere); these cuts fall after a `\n`, never inside a `\r\n`. Pieces are
 * views of the read, not copies.
 */

/** Smallest piece, bytes: a few events of a token stream, so the pieces add few reads of their own. */
export const PIECE_BYTES = 1024;

const LF = 10;

/** `chunk` cut after the first line end at or past every PIECE_BYTES; one line longer than that stays whole. */
export function* pieces(chunk: Uint8Array, size: number = PIECE_BYTES): Generator<Uint8Array> {
  let start = 0;
  while (chunk.length - start > size) {
    const lf = chunk.indexOf(LF, start + size - 1);
    if (lf === -1 || lf === chunk.length - 1) break;
    yield chunk.subarray(start, lf + 1);
    start = lf + 1;
  }
  if (start < chunk.length) yield start === 0 ? chunk : chunk.subarray(start);
}
