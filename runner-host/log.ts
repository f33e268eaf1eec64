/**
 * JSON-lines logger for the Node side (local stack and runner-host), on stderr. Fields are
 * identifiers, codes and figures; callers never pass bodies, tokens, keys or credential values.
 */
export type LogFields = Record<string, string | number | boolean | null | undefined>;
export type Logger = (level: "debug" | "info" | "warn" | "error", msg: string, fields?: LogFields) => void;

export const log: Logger = (level, msg, fields = {}) => {
  if (level === "debug" && !process.env.SVC_DEBUG) return;
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields })}\n`);
};

/** Re-emits a line that came from workerd or a child: JSON lines pass through, text is wrapped. */
export function relayLine(source: string, level: string, line: string): void {
  const trimmed = line.trimEnd();
  if (trimmed === "") return;
  if (trimmed.startsWith("{") && trimmed.endsWith("}")) {
    try {
      const parsed = JSON.parse(trimmed) as Record<string, unknown>;
      process.stderr.write(`${JSON.stringify({ source, ...parsed })}\n`);
      return;
    } catch {
      // Not JSON after all: wrap it below.
    }
  }
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg: trimmed, source })}\n`);
}
