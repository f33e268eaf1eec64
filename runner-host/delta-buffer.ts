/**
 * Coalesces the assistant deltas of one turn into fewer socket messages. A harness emits one delta
 * per provider token (often 3-4 characters); one WebSocket message each would multiply the
 * object's wake-ups and the Worker's relay work. Deltas are live-only, so merging them loses nothing.
 * Leading edge: a delta after a quiet spell goes out at once (first output is not delayed); the
 * ones that follow within `DELTA_COALESCE_MS` ride together.
 */

/** Longest a delta waits for company, ms: about one display frame, below what a reader notices. */
export const DELTA_COALESCE_MS = 16;
/** A buffer this large goes out at once, UTF-16 units (≈ bytes for text): bounds message size. */
export const DELTA_COALESCE_CHARS = 8 * 1024;

export class DeltaBuffer {
  readonly #emit: (text: string, lead: boolean) => void;
  #text = "";
  #timer: NodeJS.Timeout | undefined;
  #lastSent = -Infinity;

  /** `lead`: the delta came after a quiet spell (a turn's first output), so nothing should hold it. */
  constructor(emit: (text: string, lead: boolean) => void) {
    this.#emit = emit;
  }

  push(text: string): void {
    if (text === "") return;
    this.#text += text;
    if (this.#text.length >= DELTA_COALESCE_CHARS) return this.flush();
    if (this.#timer) return;
    const wait = this.#lastSent + DELTA_COALESCE_MS - performance.now();
    if (wait <= 0) return this.flush(true);
    this.#timer = setTimeout(() => this.flush(), wait);
  }

  /** Sends what is buffered now: before any numbered message of the turn, so order holds. */
  flush(lead = false): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#text === "") return;
    const text = this.#text;
    this.#text = "";
    this.#lastSent = performance.now();
    this.#emit(text, lead);
  }
}
