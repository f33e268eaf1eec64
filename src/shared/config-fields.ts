/**
 * Field builders and problem wording shared by the host configuration schema
 * (docs/configuration.md "Fields"). Every rule here produces a plain sentence; `issueLines`
 * (zod-issues.ts) prefixes it with the field path, so an operator reads
 * `limits.queue: must be between 1 and 1024`.
 * Pure: imported by the Worker and by Node.
 */
import * as z from "zod";
import { byteLength } from "./ids.ts";
import { WORKER_BINDINGS } from "./worker-bindings.ts";

/** An integer field with an inclusive range and a default; `max` absent means "at least min". */
export function int(min: number, def: number, max?: number) {
  const range = max === undefined ? `must be at least ${min}` : `must be between ${min} and ${max}`;
  const base = z.int().min(min, { error: range });
  return (max === undefined ? base : base.max(max, { error: range })).default(def);
}

export const nonEmpty = z.string().min(1, { error: "must not be empty" });

/**
 * Every variable the file names is given to the Worker as a binding of the same name, so one named
 * like a binding of the Worker's own would collide with it (and its secret would be unreadable):
 * refused.
 */
const notABinding = [
  (name: string) => !WORKER_BINDINGS.includes(name),
  { error: (iss: { input?: unknown }) => `${String(iss.input)} is the name of one of the Worker's own bindings: name another variable` },
] as const;

/** Names an environment variable; only its presence in the file is checked here (see config-env.ts). */
export const envName = z
  .string()
  .min(1, { error: "must name an environment variable" })
  .refine(...notABinding);
/** An environment variable's name, or "" (the default) for none. */
export const optionalEnvName = z
  .string()
  .refine(...notABinding)
  .default("");

/** A tenant is 1 to 128 UTF-8 bytes (docs/configuration.md "Tokens"). */
export const TENANT_MAX_BYTES = 128;

export const tenant = z.string().refine((s) => s.length > 0 && byteLength(s) <= TENANT_MAX_BYTES, {
  error: `must be 1 to ${TENANT_MAX_BYTES} bytes`,
});

export type UrlRules = { query: boolean; fragment: boolean; credentials: boolean };

/**
 * Why an http(s) URL is unacceptable, or undefined when it is fine. Checks the raw text as well as
 * the parsed URL: WHATWG parsing forgives `http:host` and `http:///host` and drops an empty `?` or `@`, which would let
 * a typo through as something the operator did not write.
 */
export function urlProblem(text: string, allow: UrlRules): string | undefined {
  if (!/^https?:\/\//i.test(text)) return "must be an http:// or https:// URL";
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "must be a valid http(s) URL";
  }
  const authority = text.slice(text.indexOf("//") + 2).split(/[/?#\\]/, 1)[0] ?? "";
  // `http:///v1` parses with `v1` as its host: the text has no host where the operator meant one.
  if (url.hostname === "" || authority === "") return "must be an http(s) URL with a host";
  if (!allow.credentials && authority.includes("@")) return "must not contain credentials";
  if (!allow.query && text.includes("?")) return "must not have a query";
  if (!allow.fragment && text.includes("#")) return "must not have a fragment";
  return undefined;
}

export function httpUrl(allow: UrlRules) {
  return z.string().superRefine((value, ctx) => {
    const problem = urlProblem(value, allow);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });
}

/** `listen` split into its parts; `host` is without IPv6 brackets. */
export type ListenAddress = { host: string; port: number };

/**
 * Parses a TCP `host:port` (`listen`, docs/configuration.md "Fields"). The host is a name, an IPv4
 * address or a bracketed IPv6 address (optionally with a zone); the port is 0 to 65535, where 0
 * asks the system for a free port.
 */
export function parseListen(text: string): ListenAddress | undefined {
  const m = /^(?:\[([0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(?:%[A-Za-z0-9_.-]+)?)\]|([A-Za-z0-9._-]+)):([0-9]{1,5})$/.exec(text);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port > 65535) return undefined;
  return { host: (m[1] ?? m[2])!, port };
}

export const listen = z.string().refine((s) => parseListen(s) !== undefined, {
  error: "must be host:port with a port from 0 to 65535 (IPv6 addresses in brackets, e.g. [::1]:8080)",
});

const ARTICLE: Record<string, string> = {
  string: "a string",
  // Every number in the host configuration is an integer; zod reports a non-number as expecting "number".
  number: "an integer",
  int: "an integer",
  boolean: "true or false",
  object: "an object",
  record: "an object",
  array: "an array",
};

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "number") return Number.isInteger(value) ? "an integer" : "a number";
  return ARTICLE[typeof value] ?? typeof value;
}

/**
 * Per-parse zod error map for the generic cases (wrong type, missing field, not in an enum);
 * rule-specific messages are set on the schema and take precedence over this.
 */
export function plainError(iss: z.core.$ZodRawIssue): string {
  switch (iss.code) {
    case "invalid_type":
      if (iss.input === undefined) return "is required";
      return `must be ${ARTICLE[iss.expected] ?? iss.expected}, not ${describe(iss.input)}`;
    case "invalid_value":
      return `must be one of ${iss.values.map((v) => JSON.stringify(v)).join(", ")}`;
    case "too_small":
      return iss.origin === "array" || iss.origin === "string" ? "must not be empty" : `must be at least ${iss.minimum}`;
    case "too_big":
      return `must be at most ${iss.maximum}`;
    default:
      return "is not valid";
  }
}

