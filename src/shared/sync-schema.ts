/**
 * External-storage sync of a session (docs/api.md "Flush, sync, restore"): what flush returns and
 * `GET /sessions/{id}/sync` reports. Offsets are byte offsets into the session's NDJSON event
 * history; `checkpoint` is the latest checkpoint id published to external storage.
 */
import * as z from "zod";
import { component, DateTime, Hex32 } from "./contract-registry.ts";

export const SyncStatusSchema = component(
  "SyncStatus",
  z.strictObject({
    history_bytes: z.number().int().nonnegative(),
    resume_offset: z.number().int().nonnegative(),
    pending: z.boolean(),
    checkpoint: Hex32.optional(),
    native_checkpoint: z.string().optional(),
    error: z.string().optional(),
    time: DateTime.optional(),
  }),
  "Upload state of a session: local history size, the offset a load from storage resumes at, whether an upload is pending, the latest published checkpoint and any sync error.",
);
export type SyncStatus = z.output<typeof SyncStatusSchema>;
