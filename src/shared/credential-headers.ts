/**
 * Header names a credential override's `{"headers": {...}}` may not set for a host tool (docs/api.md
 * "Credential overrides"), lowercase. Refused at create; an override stored before that check is
 * still sent without the first kind and refused with the second.
 */

/** Set by the service (or the fetch client) on every host tool request: an override's value would be replaced. */
const SERVICE_SET = ["accept", "content-type", "traceparent", "sec-fetch-mode"];

/**
 * Owned by the HTTP client or the MCP transport (framing, connection, host, MCP's own session
 * headers): a request carrying one fails, or goes somewhere or somehow it should not.
 */
const CLIENT_OWNED = [
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
  "mcp-session-id",
  "mcp-protocol-version",
  "last-event-id",
];

export const RESERVED_CREDENTIAL_HEADERS: ReadonlySet<string> = new Set([...SERVICE_SET, ...CLIENT_OWNED]);
const UNSENDABLE: ReadonlySet<string> = new Set(CLIENT_OWNED);

/**
 * What a credential value may hold to reach the tool exactly as given: visible ASCII, with spaces
 * and tabs only inside it. A CR or LF would end the header; HTTP drops spaces and tabs at its ends,
 * and a character past ASCII is sent as other bytes (UTF-8), so the tool got another value — and
 * the one it echoed back was not the one redacted, so it was stored and shown in plaintext.
 */
const SENDABLE_VALUE = /^(?:[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?)?$/;
export const SENDABLE_VALUE_RULE = "visible ASCII, with spaces or tabs only inside it";

export function sendableValue(value: string): boolean {
  return SENDABLE_VALUE.test(value);
}

/** An HTTP header name (RFC 9110 token). */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A credential override's `value` (checked at create, src/session/credentials.ts) as JSON Schema, for the OpenAPI document. */
export const CREDENTIAL_VALUE_JSON_SCHEMA = {
  oneOf: [
    { type: "string", minLength: 1, pattern: SENDABLE_VALUE.source },
    {
      type: "object",
      properties: {
        headers: {
          type: "object",
          minProperties: 1,
          propertyNames: { pattern: HEADER_NAME.source },
          additionalProperties: { type: "string", pattern: SENDABLE_VALUE.source },
        },
      },
      required: ["headers"],
      additionalProperties: false,
    },
  ],
};

/** Whether the service sets this header itself on a host tool request (an override's value would be replaced). */
export function serviceSetHeader(name: string): boolean {
  return SERVICE_SET.includes(name.toLowerCase());
}

/** At create: the first header name the service keeps for itself, or one given twice (names compare without case). */
export function credentialHeaderProblem(headers: Record<string, string>): string | undefined {
  return firstProblem(headers, RESERVED_CREDENTIAL_HEADERS);
}

/** At a call: the first header of a stored override (made before these checks) that could not be sent as given. */
export function unsendableHeader(headers: Record<string, string>): string | undefined {
  const value = Object.entries(headers).find(([, v]) => !sendableValue(v));
  if (value) return `header "${value[0]}" has a value that is not ${SENDABLE_VALUE_RULE}`;
  return firstProblem(headers, UNSENDABLE);
}

function firstProblem(headers: Record<string, string>, reserved: ReadonlySet<string>): string | undefined {
  const seen = new Set<string>();
  for (const name of Object.keys(headers)) {
    const lower = name.toLowerCase();
    if (reserved.has(lower)) return `header "${name}" is set by the service, not by a credential`;
    if (seen.has(lower)) return `header "${name}" is given twice (names compare without case)`;
    seen.add(lower);
  }
  return undefined;
}

/**
 * What a tool's echo of a header override is redacted for: each value whole and, for an
 * `Authorization` or `Proxy-Authorization` value in its `<scheme> <credentials>` form (`Bearer abc`),
 * the credentials alone, which a tool may quote without the scheme.
 */
export function headerSecrets(headers: Record<string, string>): string[] {
  return Object.entries(headers).flatMap(([name, v]) => {
    const auth = /^(proxy-)?authorization$/i.test(name);
    const credentials = auth ? /^[!#$%&'*+.^_`|~0-9A-Za-z-]+[ \t]+(\S(?:.*\S)?)$/.exec(v)?.[1] : undefined;
    return credentials === undefined ? [v] : [v, credentials];
  });
}
