/**
 * Error text a tenant reads (`session.error.message`, via `turn_end` / `open_failed`): the
 * service's own words, plus at most a redacted, bounded piece of foreign text (a provider's or a
 * harness's message). Foreign text may quote credentials (a provider echoing a key, a URL with a
 * password) or come from a process other sessions share, so it never passes unfiltered; the
 * harness's stderr goes to logs only.
 */

/** Longest piece of foreign text kept in a tenant-visible message, UTF-8 bytes. */
export const FOREIGN_TEXT_BYTES = 512;
/** Longest tenant-visible message as a whole, UTF-8 bytes: own words plus one foreign piece. */
export const TENANT_MESSAGE_BYTES = 1024;

const REDACTED = "[redacted]";

/** Patterns of secrets in free text; each match (or its group 2) becomes `[redacted]`. */
const RULES: [RegExp, string][] = [
  // HTTP authorization schemes
  [/\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]+/g, `$1 ${REDACTED}`],
  // userinfo in a URL: scheme://user:password@host
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^/\s@]*@/gi, `$1${REDACTED}@`],
  // a credential in a query string or a key=value / "key": "value" pair
  [/((?:[a-z0-9]*[-_])?(?:api[-_]?key|key|token|secret|password|passwd|pwd|signature|sig|auth|authorization|credential)s?["']?\s*[:=]\s*["']?)[^\s"'&,;}]+/gi, `$1${REDACTED}`],
  // JSON Web Tokens
  [/\beyJ[\w-]+\.[\w-]+\.[\w-]+/g, REDACTED],
  // well-known key shapes: sk-…, sk_live_…, AIza…, AKIA…, ghp_…, xoxb-…
  [/\b(?:sk|pk|rk|ak)[-_][A-Za-z0-9_-]{6,}/g, REDACTED],
  [/\b(?:AIza[0-9A-Za-z_-]{20,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,})/g, REDACTED],
  // any other long token-like run that mixes letters and digits (model ids stay below 32)
  [/[A-Za-z0-9_+/=-]{32,}/g, "\u0000"],
];

/**
 * The exact values to remove, longest first: a value inside another (`acme` and `acme.Pa55w0rd!`)
 * removed first would leave the rest of the longer one in the text.
 */
function longestFirst(secrets: Iterable<string>): string[] {
  return [...new Set(secrets)].filter((s) => s.length >= 4).sort((a, b) => b.length - a.length);
}

/** Removes credentials from `text`; `secrets` are exact values to remove as well (keys we hold). */
export function redact(text: string, secrets: Iterable<string> = []): string {
  let out = text;
  for (const s of longestFirst(secrets)) out = out.split(s).join(REDACTED);
  for (const [re, to] of RULES) {
    out = to === "\u0000" ? out.replace(re, (m) => (/[0-9]/.test(m) && /[A-Za-z]/.test(m) ? REDACTED : m)) : out.replace(re, to);
  }
  return out;
}

/** `text` cut to at most `maxBytes` UTF-8 bytes on a character boundary, with `…` when cut. */
export function bounded(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return text;
  let end = maxBytes - 3; // room for "…"
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--; // not inside a UTF-8 sequence
  return `${bytes.subarray(0, end).toString("utf8")}…`;
}

/** Foreign text fit for a tenant: one line, credentials redacted, at most FOREIGN_TEXT_BYTES. */
export function foreign(text: string, secrets: Iterable<string> = []): string {
  // biome-ignore lint: control characters are what this removes
  const line = text.replace(/[\u0000-\u001f\u007f]+/g, " ").trim();
  return bounded(redact(line, secrets), FOREIGN_TEXT_BYTES);
}

/** The last pass before a message leaves for the object: redacted again and bounded as a whole. */
export function tenantMessage(message: string, secrets: Iterable<string> = []): string {
  return bounded(redact(message, secrets), TENANT_MESSAGE_BYTES);
}

/**
 * `value` (any JSON) with every exact secret value in its strings replaced by `[redacted]`. For
 * content that is not error text (a tool's result, a harness's native records): only the values we
 * hold are removed, never the patterns `redact` also applies, which would change ordinary text.
 * Parts with nothing to remove are returned as they are (no copy, and no serialisation on the
 * turn's path: native records are redacted on every `state.append`).
 */
export function redactValues<T>(value: T, secrets: Iterable<string>): T {
  const list = longestFirst(secrets);
  if (list.length === 0) return value;
  const scrub = (v: string): string => (list.some((s) => v.includes(s)) ? list.reduce((out, s) => out.split(s).join(REDACTED), v) : v);
  // A copy is made only from the first part that changed: the walk allocates nothing for a record
  // with nothing to remove (every native record of every turn is walked).
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return scrub(v);
    if (v === null || typeof v !== "object") return v;
    if (Array.isArray(v)) {
      let out: unknown[] | undefined;
      for (let i = 0; i < v.length; i++) {
        const x = walk(v[i]);
        if (x !== v[i]) (out ??= v.slice())[i] = x;
      }
      return out ?? v;
    }
    const o = v as Record<string, unknown>;
    const keys = Object.keys(o);
    let out: [string, unknown][] | undefined;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      const wk = scrub(k);
      const wx = walk(o[k]);
      if (out === undefined && (wk !== k || wx !== o[k])) out = keys.slice(0, i).map((p) => [p, o[p]]);
      out?.push([wk, wx]);
    }
    return out ? Object.fromEntries(out) : v;
  };
  return walk(value) as T;
}
