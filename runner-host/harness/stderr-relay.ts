/**
 * A harness process's stderr, re-logged as JSON records: one per line, provider keys redacted, each
 * cut at `MAX_STDERR_LINE_CHARS`, at most `STDERR_LINES_PER_SECOND` a second (the rest counted in one
 * record when that second ends), and the last `STDERR_TAIL_LINES` kept for the record of an unclean exit. stderr never
 * reaches a tenant: the process is shared by the tenant's sessions.
 */
import type { Readable } from "node:stream";
import { performance } from "node:perf_hooks";

/** A re-logged stderr line is cut at this many characters so a runaway child cannot flood logs. */
const MAX_STDERR_LINE_CHARS = 8_192;
/** Stderr lines kept for the log record of an abnormal exit, which makes CI failures readable. */
const STDERR_TAIL_LINES = 20;
/**
 * Stderr lines re-logged per process per second; the rest are counted and reported as one record
 * when the next second starts (and at exit). A harness printing in a loop would otherwise turn
 * into an unbounded log stream (measured: 100,000 lines in under 1 s, 18 MB of records).
 */
const STDERR_LINES_PER_SECOND = 200;

type Log = (level: string, msg: string, fields: Record<string, unknown>) => void;

export class StderrRelay {
  readonly #log: Log;
  readonly #redact: (text: string) => string;
  readonly #tail: string[] = [];
  #window = { start: -Infinity, lines: 0, dropped: 0 };
  /** Reports the second's dropped lines when it ends, also when no further line comes. */
  #report?: NodeJS.Timeout;

  constructor(stream: Readable, log: Log, redact: (text: string) => string) {
    this.#log = log;
    this.#redact = redact;
    let partial = "";
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      const lines = (partial + chunk).split("\n");
      partial = lines.pop() ?? "";
      if (partial.length > MAX_STDERR_LINE_CHARS) {
        lines.push(partial);
        partial = "";
      }
      for (const line of lines) this.#line(line);
    });
    stream.on("end", () => partial && this.#line(partial));
  }

  /** The last lines, for the log record of an unclean exit. */
  get tail(): string {
    return this.#tail.join("\n");
  }

  /** Reports lines dropped in the current second (at its end, or at exit). */
  flush(): void {
    clearTimeout(this.#report);
    this.#report = undefined;
    const w = this.#window;
    if (w.dropped === 0) return;
    this.#log("warn", "harness stderr lines dropped", { dropped: w.dropped, limit_per_second: STDERR_LINES_PER_SECOND });
    w.dropped = 0;
  }

  #line(raw: string): void {
    const line = this.#redact(raw.endsWith("\r") ? raw.slice(0, -1) : raw).slice(0, MAX_STDERR_LINE_CHARS);
    if (line.length === 0) return;
    this.#tail.push(line);
    if (this.#tail.length > STDERR_TAIL_LINES) this.#tail.shift();
    const w = this.#window;
    const now = performance.now();
    if (now - w.start >= 1_000) {
      this.flush();
      w.start = now;
      w.lines = 0;
    }
    if (++w.lines > STDERR_LINES_PER_SECOND) {
      w.dropped++;
      this.#report ??= setTimeout(() => this.flush(), Math.max(0, w.start + 1_000 - now)).unref();
      return;
    }
    this.#log("info", "harness stderr", { line });
  }
}
