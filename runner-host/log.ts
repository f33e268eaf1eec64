/**
 * JSON-lines logging for the Node side (the `svc` CLI, the local stack, the runner-host and its
 * harness pool), on stderr. `writeLogLine` is the one writer: every line gets `time` first. Fields
 * are identifiers, codes and figures; callers never pass bodies, tokens, keys or credential values.
 */
export type LogFields = Record<string, string | number | boolean | null | undefined>;
export type Logger = (level: "debug" | "info" | "warn" | "error", msg: string, fields?: LogFields) => void;

/** Writes one record as a JSON line on stderr, stamped with the time unless it carries its own. */
export function writeLogLine(record: Record<string, unknown>): void {
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), ...record })}\n`);
}

export const log: Logger = (level, msg, fields = {}) => {
  if (level === "debug" && !process.env.SVC_DEBUG) return;
  writeLogLine({ level, msg, ...fields });
};

/** Re-emits a line that came from workerd or a child: JSON lines pass through, text is wrapped. */
export function relayLine(source: string, level: string, line: string): void {
  const trimmed = line.trimEnd();
  if (trimmed === "") return;
  if (trimmed.startsWith("{") && trimmed.endsWith("}")) {
    try {
      const parsed = JSON.parse(trimmed) as Record<string, unknown>;
      writeLogLine({ source, ...parsed });
      return;
    } catch {
      // Not JSON after all: wrap it below.
    }
  }
  writeLogLine({ level, msg: trimmed, source });
}
