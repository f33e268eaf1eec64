/**
 * The host configuration file (docs/configuration.md, field by field) as one zod schema: strict
 * objects everywhere, defaults applied, cross-field rules checked together.
 * Pure — no environment access; `config-env.ts` checks the variables the file names. Imported by
 * the Worker (bundled config text) and by the Node `svc` command.
 */
import * as z from "zod";
import {
  envName,
  httpUrl,
  int,
  listen,
  nonEmpty,
  plainError,
  tenant,
} from "./config-fields.ts";
import { PersistenceSchema } from "./config-persistence.ts";
import { ToolsSchema } from "./config-tools.ts";
import { ID_ANY_CASE_PATTERN } from "./ids.ts";
import { MAX_JSON_DEPTH, nestingExceeds } from "./json-text.ts";
import { unkeptValues } from "./json-values.ts";
import { issueLines } from "./zod-issues.ts";

export type { ListenAddress } from "./config-fields.ts";
export { parseListen } from "./config-fields.ts";
export type { Persistence, PersistenceProvider } from "./config-persistence.ts";
export type { HostTool, JsonObject } from "./config-tools.ts";

/** The host configuration file is at most 4 MiB. */
export const MAX_CONFIG_BYTES = 4 * 1024 * 1024;
/**
 * Deepest nesting a configuration file may have, levels. Its own fields nest a few levels and a tool
 * schema at most MAX_JSON_DEPTH more; what reads the value after JSON.parse (the schema check,
 * structured clone) recurses, and a file nested thousands deep overflowed the stack.
 */
export const MAX_CONFIG_DEPTH = 2 * MAX_JSON_DEPTH;

/** A harness name is 1 to 64 characters (Unicode code points). */
export const HARNESS_NAME_MAX_CHARS = 64;

/** Transports the reference harness (pi-ai) can be switched to with a provider's `api`. */
export const PROVIDER_APIS = [
  "openai-completions",
  "openai-responses",
  "anthropic-messages",
  "google-generative-ai",
  "mistral-conversations",
] as const;

export const TokenSchema = z.strictObject({
  token_env: envName,
  tenant,
  session: z
    .string()
    .refine((s) => s === "" || ID_ANY_CASE_PATTERN.test(s), { error: "must be a 32-character hexadecimal session id" })
    // Session ids are issued in lowercase; a grant written in uppercase must still match them.
    .transform((s) => s.toLowerCase())
    .default(""),
  manage: z.boolean().default(false),
  read_only: z.boolean().default(false),
});

/** `max_shared`: default 8, 1 to 1024 (docs/configuration.md "Harnesses"). */
export const MAX_SHARED = { min: 1, max: 1024, default: 8 } as const;

export const HarnessSchema = z
  .strictObject({
    command: z.array(z.string()).min(1, { error: "must list the program to run and its arguments" }),
    max_shared: int(MAX_SHARED.min, MAX_SHARED.default, MAX_SHARED.max),
    max_active_turns: z.int().optional(),
    max_hosts: int(1, 16),
    max_starting: int(1, 4),
    /** Extension: started, tenant-neutral processes kept ready for new sessions (0 = none). */
    spares: int(0, 1, 16),
  })
  .superRefine((h, ctx) => {
    if (h.command.length > 0 && h.command[0] === "") {
      ctx.addIssue({ code: "custom", path: ["command", 0], message: "must not be empty (it is the program to run)" });
    }
    const shared = Math.min(Math.max(h.max_shared, MAX_SHARED.min), MAX_SHARED.max);
    if (h.max_active_turns !== undefined && (h.max_active_turns < 1 || h.max_active_turns > shared)) {
      ctx.addIssue({ code: "custom", path: ["max_active_turns"], message: `must be between 1 and max_shared (${shared})` });
    }
  })
  .transform((h) => ({ ...h, max_active_turns: h.max_active_turns ?? h.max_shared }));

export const ProviderSchema = z.strictObject({
  api_key_env: envName,
  base_url: httpUrl({ credentials: false, query: true, fragment: true }).optional(),
  api: z.enum(PROVIDER_APIS, { error: `must be one of ${PROVIDER_APIS.join(", ")}` }).optional(),
});

/** `limits` (docs/configuration.md "Limits"): every field optional, validated together. */
export const LimitsSchema = z
  .strictObject({
    active: int(1, 16),
    loaded: int(1, 1024),
    queue: int(1, 16, 1024),
    input_bytes: int(1, 65_536, 1_048_576),
    session_bytes: int(16_777_216, 1_073_741_824),
    subscribers: int(1, 128),
    subscriber_events: int(1, 128),
    subscriber_bytes: int(4096, 2_097_152),
  })
  .superRefine((l, ctx) => {
    if (l.loaded < l.active) {
      ctx.addIssue({ code: "custom", path: ["loaded"], message: `must be at least limits.active (${l.active})` });
    }
  });

export const CredentialKeysSchema = z
  .strictObject({
    active: nonEmpty,
    keys: z.record(z.string(), envName),
  })
  .superRefine((c, ctx) => {
    const ids = Object.keys(c.keys);
    if (ids.length === 0) ctx.addIssue({ code: "custom", path: ["keys"], message: "must name at least one key" });
    for (const id of ids) {
      if (id === "") ctx.addIssue({ code: "custom", path: ["keys", id], message: "a key id must not be empty" });
    }
    if (c.active !== "" && !Object.hasOwn(c.keys, c.active)) {
      ctx.addIssue({ code: "custom", path: ["active"], message: `"${c.active}" is not one of keys` });
    }
  });

/** Cloudflare's Durable Object location hints: where a region's session objects are created. */
export const LOCATION_HINTS = ["wnam", "enam", "sam", "weur", "eeur", "apac", "apac-ne", "apac-se", "oc", "afr", "me"] as const;

/** A runner region's name: lowercase, short, safe in an object name and a query string. */
export const regionName = z.string().regex(/^[a-z0-9][a-z0-9-]{0,31}$/, {
  error: "must be 1 to 32 lowercase letters, digits or dashes, starting with a letter or digit",
});

/** The region of runner-hosts that announce none, and of a deployment that configures none. */
export const DEFAULT_REGION = "default";

export const RegionSchema = z.strictObject({
  location_hint: z.enum(LOCATION_HINTS, { error: `must be one of ${LOCATION_HINTS.join(", ")}` }).optional(),
});

/**
 * The runner-host shared secret, and the regions runner-hosts may announce (each with its own
 * placement pool; sessions homed there are created near `location_hint`). No `regions`: one pool,
 * region "default" (docs/configuration.md "Runner-hosts").
 */
export const RunnersConfigSchema = z.strictObject({
  token_env: envName,
  regions: z
    .record(z.string(), RegionSchema)
    .superRefine((r, ctx) => {
      for (const name of Object.keys(r)) {
        if (!regionName.safeParse(name).success) ctx.addIssue({ code: "custom", path: [name], message: "region names are 1 to 32 lowercase letters, digits or dashes" });
      }
    })
    .default({}),
});

export const HarnessesSchema = z.record(z.string(), HarnessSchema).superRefine((h, ctx) => {
  const names = Object.keys(h);
  if (names.length === 0) ctx.addIssue({ code: "custom", message: "must configure at least one harness" });
  for (const name of names) {
    const chars = [...name].length;
    if (chars < 1 || chars > HARNESS_NAME_MAX_CHARS) {
      ctx.addIssue({ code: "custom", path: [name], message: `name must be 1 to ${HARNESS_NAME_MAX_CHARS} characters` });
    }
  }
});

const providers = z
  .record(z.string(), ProviderSchema)
  .superRefine((p, ctx) => {
    for (const prefix of Object.keys(p)) {
      // `config.model` is `provider/model`: a prefix with a slash could never be selected.
      if (prefix === "" || prefix.includes("/")) {
        ctx.addIssue({ code: "custom", path: [prefix], message: "prefix must be non-empty and must not contain /" });
      }
    }
  })
  .default({});

export const HostConfigSchema = z.strictObject({
  listen: listen.default("127.0.0.1:8080"),
  public_url: httpUrl({ credentials: false, query: false, fragment: false }).default("http://127.0.0.1:8080"),
  /** A hidden directory in the working directory; resolved by the Node side. */
  data_dir: nonEmpty.default(".svc"),
  tokens: z.array(TokenSchema).min(1, { error: "must list at least one token" }),
  harnesses: HarnessesSchema,
  providers,
  tools: ToolsSchema,
  limits: LimitsSchema.prefault({}),
  persistence: PersistenceSchema.nullable().default(null),
  credential_keys: CredentialKeysSchema.nullable().default(null),
  runners: RunnersConfigSchema.nullable().default(null),
});

export type HostConfig = z.output<typeof HostConfigSchema>;
export type Token = z.output<typeof TokenSchema>;
export type Harness = z.output<typeof HarnessSchema>;
export type Provider = z.output<typeof ProviderSchema>;
export type ProviderApi = (typeof PROVIDER_APIS)[number];
export type Limits = z.output<typeof LimitsSchema>;
export type CredentialKeys = z.output<typeof CredentialKeysSchema>;
export type RunnersConfig = z.output<typeof RunnersConfigSchema>;
export type LocationHint = (typeof LOCATION_HINTS)[number];

export type ConfigResult = { ok: true; config: HostConfig } | { ok: false; problems: string[] };

const encoder = new TextEncoder();

/** Parses an already-decoded JSON value. */
export function parseHostConfig(value: unknown): ConfigResult {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, problems: ["the configuration must be a JSON object"] };
  }
  const unkept = unkeptValues(value);
  if (unkept.length > 0) return { ok: false, problems: unkept };
  const r = HostConfigSchema.safeParse(value, { error: plainError });
  return r.success ? { ok: true, config: r.data } : { ok: false, problems: issueLines(r.error.issues) };
}

/** Parses the text of a configuration file: size, JSON syntax, trailing data, then the schema. */
export function parseHostConfigText(text: string): ConfigResult {
  return parseConfigText(text, parseHostConfig);
}

/** The text rules every configuration file shares (size, JSON, trailing data), then `parse`. */
export function parseConfigText<R>(text: string, parse: (value: unknown) => R | { ok: false; problems: string[] }): R | { ok: false; problems: string[] } {
  // Each UTF-16 unit is at least one UTF-8 byte, so long text is refused before encoding it.
  const bytes = text.length > MAX_CONFIG_BYTES ? text.length : encoder.encode(text).length;
  if (bytes > MAX_CONFIG_BYTES) {
    return { ok: false, problems: [`the configuration is larger than ${MAX_CONFIG_BYTES} bytes (4 MiB)`] };
  }
  // Editors on some systems save a byte-order mark; it is not part of the JSON text.
  const body = text.startsWith("\uFEFF") ? text.slice(1) : text;
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (e) {
    return { ok: false, problems: [jsonProblem(body, e)] };
  }
  if (nestingExceeds(body, MAX_CONFIG_DEPTH)) return { ok: false, problems: [`the configuration nests deeper than ${MAX_CONFIG_DEPTH} levels`] };
  return parse(value);
}

function jsonProblem(text: string, error: unknown): string {
  const end = endOfRootValue(text);
  if (end > 0 && !/^[ \t\r\n]*$/.test(text.slice(end))) {
    try {
      JSON.parse(text.slice(0, end));
      const at = end + (/^[ \t\r\n]*/.exec(text.slice(end))?.[0].length ?? 0);
      return `unexpected data after the root object at ${lineColumn(text, at)}`;
    } catch {
      // The root value is itself malformed: report that instead.
    }
  }
  return `not valid JSON: ${error instanceof Error ? error.message : String(error)}`;
}

/** Index just past the first top-level object or array, or -1; strings are skipped whole. */
function endOfRootValue(text: string): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) return i + 1;
      if (depth < 0) return -1;
    }
  }
  return -1;
}

function lineColumn(text: string, index: number): string {
  const before = text.slice(0, index).split("\n");
  return `line ${before.length} column ${before[before.length - 1]!.length + 1}`;
}
