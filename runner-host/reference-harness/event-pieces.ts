/**
 * A provider's event stream goes to its SDK in pieces of about a kilobyte, each ending a line
 * (./stream-end.ts relays every successful event-stream answer through `LinePieces`).
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
 * The same SDKs join what a read leaves unfinished with the next one by copying both into a new
 * buffer, and scan all of it again for an event's end: a line that spans many reads (a 9 MiB
 * reply in one event) cost them O(reads × its length) — ~9 s for the harness's test of an
 * oversize reply. `LinePieces` therefore
 * hands on only whole lines: what a read leaves after its last line end waits for the read that
 * ends it, and goes on joined to that line in one piece.
 *
 * Any cut is correct (the SDKs must take events split anywhere, as a network splits them); these
 * cuts fall after a `\n`, never inside a `\r\n`. Pieces are views of the reads, not copies,
 * except a line that spanned reads, copied once.
 */
import { concatBytes } from "../../src/shared/bytes.ts";

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

/** A stream's reads as pieces of whole lines; a line's start waits for the read with its end. */
export class LinePieces {
  #held: Uint8Array[] = [];

  /** The pieces of `read` that end lines, the held start of the first one joined to it. */
  *push(read: Uint8Array): Generator<Uint8Array> {
    const last = read.lastIndexOf(LF);
    if (last === -1) {
      if (read.length > 0) this.#held.push(read);
      return;
    }
    let from = 0;
    if (this.#held.length > 0) {
      from = read.indexOf(LF) + 1;
      yield concatBytes([...this.#held, read.subarray(0, from)]);
      this.#held = [];
    }
    if (from <= last) yield* pieces(read.subarray(from, last + 1));
    if (last + 1 < read.length) this.#held.push(read.subarray(last + 1));
  }

  /** At the stream's end: what no line end followed, in one piece, or nothing. */
  end(): Uint8Array | undefined {
    const rest = this.#held.length === 0 ? undefined : this.#held.length === 1 ? this.#held[0] : concatBytes(this.#held);
    this.#held = [];
    return rest;
  }
}
