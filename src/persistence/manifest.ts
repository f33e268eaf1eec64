/**
 * The checkpoint manifest: one JSON object per published checkpoint (and `latest.json`, a copy of
 * the newest), enough to rebuild the session on an empty deployment. Written by the uploader and
 * read back by restore and load, so both ends share this schema.
 */
import * as z from "zod";
import { SESSION_STATUSES, SessionConfigSchema, ToolSchema } from "../shared/api-schema.ts";
import { issueSummary } from "../shared/zod-issues.ts";
import { StoreError } from "./store.ts";

export const MANIFEST_FORMAT = 1;

const Hex32 = z.string().regex(/^[a-f0-9]{32}$/);
const Offset = z.int().min(0);

export const BlockRefSchema = z.strictObject({ key: z.string().min(1), start: Offset, end: Offset });
export type BlockRef = z.infer<typeof BlockRefSchema>;

export const CheckpointRefSchema = z.strictObject({
  id: Hex32,
  offset: Offset,
  time: z.string(),
  /** Key of the native records this checkpoint's turn appended. */
  native: z.string().min(1),
  /** How many native records that object holds. */
  records: z.int().min(0),
  /** SHA-256 of that object (64 hex); absent in manifests written before it was recorded. */
  sha256: z.string().regex(/^[a-f0-9]{64}$/).optional(),
});
export type CheckpointRef = z.infer<typeof CheckpointRefSchema>;

/** A session's tool binding as stored (src/session/bindings.ts `StoredBinding`). */
const StoredBindingSchema = z.strictObject({
  alias: z.string(),
  tools: z.array(z.string()),
  executor: z.string().optional(),
  runtime: z.array(ToolSchema).optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
});

export const ManifestSchema = z.strictObject({
  format: z.literal(MANIFEST_FORMAT),
  session: z.strictObject({
    id: Hex32,
    tenant: z.string().min(1),
    harness: z.string().min(1),
    config: SessionConfigSchema,
    created_at: z.string(),
    updated_at: z.string(),
    /**
     * The status when this manifest was written, with its checkpoint (absent in older ones): a load
     * that comes back with another one (a turn was running then) changes the session, so its
     * `updated_at` is the load's time.
     */
    status: z.enum(SESSION_STATUSES).optional(),
    descriptors: z.array(ToolSchema),
    credential_bindings: z.array(z.string()).optional(),
    /** Tool bindings (runtime tools and credential overrides); absent when the session has none. */
    bindings: z.array(StoredBindingSchema).optional(),
  }),
  /** Cursor MAC key and log epoch, so cursors a client holds keep working after a load. */
  cursor_key: z.string().min(1),
  epoch: z.int().min(1),
  /** Earlier epochs and the last event position each kept (restores cut the log). */
  epoch_cuts: z.array(z.strictObject({ epoch: z.int().min(1), last_seq: z.int().min(0) })),
  /** Private credential overrides, as ciphertext only. */
  credentials: z.array(z.strictObject({ alias: z.string(), key_id: z.string(), iv: z.string(), ciphertext: z.string() })),
  /** The checkpoint this manifest publishes; null before the first completed turn. */
  checkpoint: z.strictObject({ id: Hex32, offset: Offset, time: z.string() }).nullable(),
  /** Blocks covering the history from 0 to at least the checkpoint's offset, in order. */
  history: z.array(BlockRefSchema),
  /** Every checkpoint up to this one, oldest first. */
  checkpoints: z.array(CheckpointRefSchema),
});
export type Manifest = z.infer<typeof ManifestSchema>;

/** A manifest from storage, or a StoreError that says what is wrong with it (for the log). */
export function parseManifest(bytes: Uint8Array): Manifest {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new StoreError("the stored manifest is not JSON");
  }
  const r = ManifestSchema.safeParse(value);
  if (!r.success) throw new StoreError(`the stored manifest is not one this release reads: ${issueSummary(r.error.issues)}`);
  return r.data;
}
