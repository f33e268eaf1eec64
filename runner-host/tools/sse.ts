/**
 * An incremental server-sent-events parser (WHATWG HTML "Interpreting an event stream"): feed it
 * decoded text in any chunking, get whole events back. Lines end in CRLF, LF or CR; `data` lines
 * join with LF; comments and `id`/`retry` are ignored (a tool call's stream is never resumed); an
 * event unfinished at end of stream is dropped, as the standard says.
 */

export type SseEvent = { event: string; data: string };

export class SseParser {
  #buffer = "";
  /** Index in `#buffer` where the search for the next line end resumes. */
  #scanned = 0;
  #event = "";
  #data: string[] = [];

  /** Parses what `text` completes; a CR at the very end waits to see whether an LF follows. */
  push(text: string): SseEvent[] {
    this.#buffer += text;
    return this.#drain(false);
  }

  /** The stream ended: a trailing CR ends its line; an event without its blank line is dropped. */
  end(): SseEvent[] {
    const events = this.#drain(true);
    this.#buffer = "";
    this.#scanned = 0;
    this.#event = "";
    this.#data = [];
    return events;
  }

  #drain(final: boolean): SseEvent[] {
    const events: SseEvent[] = [];
    let lineStart = 0;
    const lineEnd = /\r\n|\r|\n/g;
    lineEnd.lastIndex = this.#scanned;
    for (let m = lineEnd.exec(this.#buffer); m; m = lineEnd.exec(this.#buffer)) {
      if (m[0] === "\r" && m.index === this.#buffer.length - 1 && !final) break;
      const event = this.#line(this.#buffer.slice(lineStart, m.index));
      if (event) events.push(event);
      lineStart = m.index + m[0].length;
    }
    this.#buffer = this.#buffer.slice(lineStart);
    // Resume after what was already searched, minus a held-back CR.
    this.#scanned = this.#buffer.endsWith("\r") ? this.#buffer.length - 1 : this.#buffer.length;
    return events;
  }

  #line(line: string): SseEvent | undefined {
    if (line === "") {
      const event = this.#data.length > 0 ? { event: this.#event || "message", data: this.#data.join("\n") } : undefined;
      this.#event = "";
      this.#data = [];
      return event;
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.#event = value;
    else if (field === "data") this.#data.push(value);
    return undefined;
  }
}
