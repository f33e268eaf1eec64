/**
 * Batched protocol output: messages queued during one event-loop turn go to stdout in ONE write
 * (flushed from `setImmediate`), and consecutive `assistant.delta` events of the same session and
 * turn are merged into one line. A fast provider hands over hundreds of deltas per socket read;
 * one `write(2)` and one line each cost the harness and the runner-host more CPU than the model
 * call itself (bench/RESULTS.md). Text and order are unchanged: only adjacent deltas of one turn
 * merge, and every other message keeps its place between them.
 *
 * Lifecycle: `queue` schedules a flush on the first message of a turn; `flush` empties the queue
 * synchronously (called before an exit so nothing queued is lost).
 */
import type { HarnessOutput } from "../harness/protocol.ts";
import { serializeJsonLine } from "../harness/jsonl.ts";

/** Merged delta text per line at most, UTF-16 units: far below the line limit, bounds one line. */
const MAX_MERGED_CHARS = 64 * 1024;

export class OutputBatch {
  readonly #write: (text: string) => void;
  #queued: HarnessOutput[] = [];
  #scheduled = false;
  /** Turns that have written a delta (until their `turn.end`): only a turn's first delta skips the queue. */
  readonly #started = new Set<string>();

  constructor(write: (text: string) => void) {
    this.#write = write;
  }

  queue(m: HarnessOutput): void {
    const last = this.#queued.at(-1);
    if (
      m.type === "assistant.delta" &&
      last?.type === "assistant.delta" &&
      last.session === m.session &&
      last.turn === m.turn &&
      last.text.length + m.text.length <= MAX_MERGED_CHARS
    ) {
      // The queued object is ours (a copy below), so it may be extended in place.
      last.text += m.text;
      return;
    }
    if (m.type === "assistant.delta" && this.#queued.length === 0 && !this.#started.has(m.turn)) {
      // A turn's first delta is its first output: written at once, not after the rest of the read.
      this.#started.add(m.turn);
      return this.#write(serializeJsonLine(m));
    }
    this.#queued.push(m.type === "assistant.delta" ? { ...m } : m);
    if (m.type === "turn.end") this.#started.delete(m.turn);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  flush(): void {
    this.#scheduled = false;
    if (this.#queued.length === 0) return;
    const out = this.#queued;
    this.#queued = [];
    let text = "";
    for (const m of out) text += serializeJsonLine(m);
    this.#write(text);
  }
}
