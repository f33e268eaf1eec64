/**
 * Header names a credential override's `{"headers": {...}}` may not set (docs/api.md "Credential
 * overrides"), lowercase: the ones the service sets on every tool request (the body's type, what it
 * accepts, the trace, MCP's own session headers) and the ones the HTTP client owns (framing,
 * connection, host). One of them could never be sent as given: a request with it fails, or
 * silently goes without it. Checked at create, and again before a call (an override stored before
 * this check).
 */
export const RESERVED_CREDENTIAL_HEADERS: ReadonlySet<string> = new Set([
  "accept",
  "content-type",
  "traceparent",
  "tracestate",
  "mcp-session-id",
  "mcp-protocol-version",
  "last-event-id",
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "upgrade",
  "te",
  "trailer",
  "expect",
  "proxy-connection",
]);

/** The first header name of `headers` the service keeps for itself, or one given twice (names compare without case). */
export function credentialHeaderProblem(headers: Record<string, string>): string | undefined {
  const seen = new Set<string>();
  for (const name of Object.keys(headers)) {
    const lower = name.toLowerCase();
    if (RESERVED_CREDENTIAL_HEADERS.has(lower)) return `header "${name}" is set by the service, not by a credential`;
    if (seen.has(lower)) return `header "${name}" is given twice (names compare without case)`;
    seen.add(lower);
  }
  return undefined;
}
