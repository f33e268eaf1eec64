/**
 * The event streams one Worker isolate is relaying, so that a shutdown ends them cleanly (docs/api.md
 * "Shutdown and readiness": the service interrupts running turns and ends open event streams).
 *
 * Ending a stream asks its object to end it after everything the object already sent on it, so
 * the events of the turns the shutdown interrupted reach the client before the stream ends; the
 * relay then writes what it holds and ends the response. A stream counts as ended once the runtime
 * has taken its last byte. Whatever has not ended within the bound (a client that stopped reading,
 * an object that does not answer) is cut.
 *
 * Lifecycle: isolate memory only. Once `endAll` has run the isolate is closing for good (the local
 * stack is about to stop its runtime): new streams are refused from then on.
 */

/** What the registry needs of one relayed stream (src/sse/session-stream.ts). */
export type EndableStream = {
  /** Asks for a graceful end: what the object already sent still reaches the client. */
  end(): void;
  /** Ends it now; what is still queued is dropped. */
  cut(): void;
  /** Resolves once the stream is over: its last byte taken by the runtime, or cut. */
  readonly ended: Promise<void>;
};

export class OpenStreams {
  readonly #open = new Set<EndableStream>();
  #closing = false;

  /** True once `endAll` was called: a new stream would only be cut when the runtime stops. */
  get closing(): boolean {
    return this.#closing;
  }

  get size(): number {
    return this.#open.size;
  }

  /** Tracks a stream until it is over. */
  add(stream: EndableStream): void {
    this.#open.add(stream);
    void stream.ended.then(() => this.#open.delete(stream));
  }

  /** Ends every open stream, waiting at most `ms` for them; cuts the rest. Counts both. */
  async endAll(ms: number): Promise<{ ended: number; cut: number }> {
    this.#closing = true;
    const streams = [...this.#open];
    for (const s of streams) s.end();
    const over = new Set<EndableStream>();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(streams.map((s) => s.ended.then(() => over.add(s)))),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))),
    ]);
    if (timer !== undefined) clearTimeout(timer);
    const late = streams.filter((s) => !over.has(s));
    for (const s of late) s.cut();
    return { ended: streams.length - late.length, cut: late.length };
  }
}

/** This isolate's streams. */
export const openStreams = new OpenStreams();
