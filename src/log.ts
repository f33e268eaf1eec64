/**
 * JSON-lines logging for the Worker and its objects. workerd hands console output to the host
 * (the local stack writes it to stderr; production sends it to Workers Logs). Callers pass
 * identifiers and codes only: never bodies, tokens, keys or credential values.
 */
type Fields = Record<string, string | number | boolean | undefined>;

export function log(level: "info" | "warn" | "error", msg: string, fields: Fields = {}): void {
  const line = JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields });
  if (level === "error") console.error(line);
  else console.log(line);
}
