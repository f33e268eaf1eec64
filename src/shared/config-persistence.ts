/**
 * Persistence settings of the host configuration (docs/configuration.md "Persistence"). Which
 * fields a provider needs, allows and refuses is decided here once; a field that the chosen
 * provider would ignore is an error rather than silently dropped.
 */
import * as z from "zod";
import { envName, httpUrl, int, nonEmpty, optionalEnvName } from "./config-fields.ts";

export const PERSISTENCE_PROVIDERS = ["filesystem", "s3", "r2", "gcs"] as const;
export type PersistenceProvider = (typeof PERSISTENCE_PROVIDERS)[number];

/** Background scan interval, seconds; default 5, range 1 to 3600 (an hour). */
export const PERSISTENCE_INTERVAL_SECONDS = { min: 1, max: 3600, default: 5 } as const;
/** Pending dirty sessions; default 128, range 1 to 10000. */
export const PERSISTENCE_QUEUE = { min: 1, max: 10_000, default: 128 } as const;

type Field = "directory" | "bucket" | "region" | "endpoint" | "access_key_env" | "secret_key_env";

/** Per provider: fields it requires and fields it refuses (the rest are optional). */
const RULES: Record<PersistenceProvider, { required: Field[]; refused: Field[] }> = {
  filesystem: { required: ["directory"], refused: ["bucket", "region", "endpoint", "access_key_env", "secret_key_env"] },
  s3: { required: ["bucket"], refused: ["directory"] },
  r2: { required: ["bucket", "endpoint", "access_key_env", "secret_key_env"], refused: ["directory"] },
  gcs: { required: ["bucket"], refused: ["directory", "region", "endpoint", "access_key_env", "secret_key_env"] },
};

/**
 * Why an object-key prefix is unacceptable: it must stay inside the bucket or directory, and be
 * folder names every provider stores alike (a filesystem has no empty, `.` or control-character
 * folder; `-check` took `x//y` and every upload then failed).
 */
export function prefixProblem(prefix: string): string | undefined {
  if (prefix.startsWith("/")) return "must be relative (no leading /)";
  if (prefix.includes("\\")) return "must not contain a backslash";
  if (prefix.includes("..")) return "must not contain ..";
  if (/[\u0000-\u001f\u007f]/.test(prefix)) return "must not contain a control character";
  const folders = prefix.endsWith("/") ? prefix.slice(0, -1).split("/") : prefix.split("/");
  if (prefix !== "" && folders.some((f) => f === "" || f === ".")) return "must not have an empty or . folder (// or /./)";
  return undefined;
}

export const PersistenceSchema = z
  .strictObject({
    provider: z.enum(PERSISTENCE_PROVIDERS, { error: `must be one of ${PERSISTENCE_PROVIDERS.join(", ")}` }),
    directory: nonEmpty.optional(),
    bucket: nonEmpty.optional(),
    region: nonEmpty.optional(),
    endpoint: httpUrl({ credentials: false, query: false, fragment: false }).optional(),
    prefix: z.string().default(""),
    access_key_env: envName.optional(),
    secret_key_env: envName.optional(),
    postgres_env: optionalEnvName,
    interval_seconds: int(PERSISTENCE_INTERVAL_SECONDS.min, PERSISTENCE_INTERVAL_SECONDS.default, PERSISTENCE_INTERVAL_SECONDS.max),
    queue: int(PERSISTENCE_QUEUE.min, PERSISTENCE_QUEUE.default, PERSISTENCE_QUEUE.max),
  })
  .superRefine((p, ctx) => {
    const rules = RULES[p.provider];
    for (const field of rules.required) {
      if (p[field] === undefined) ctx.addIssue({ code: "custom", path: [field], message: `is required with provider "${p.provider}"` });
    }
    for (const field of rules.refused) {
      if (p[field] !== undefined) ctx.addIssue({ code: "custom", path: [field], message: `is not allowed with provider "${p.provider}"` });
    }
    // Optional for s3 (the default credential chain applies), but never one without the other.
    if (p.provider === "s3" && (p.access_key_env === undefined) !== (p.secret_key_env === undefined)) {
      const missing = p.access_key_env === undefined ? "access_key_env" : "secret_key_env";
      ctx.addIssue({ code: "custom", path: [missing], message: "is required when the other of access_key_env and secret_key_env is set" });
    }
    const problem = prefixProblem(p.prefix);
    if (problem) ctx.addIssue({ code: "custom", path: ["prefix"], message: problem });
  })
  .transform((p) => (p.provider === "r2" && p.region === undefined ? { ...p, region: "auto" } : p));

export type Persistence = z.output<typeof PersistenceSchema>;

