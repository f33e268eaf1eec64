/** Contract of flush, sync and restore (docs/api.md "Flush, sync, restore"). */
import { EmptySchema, RestoreSchema, SessionSchema } from "./api-schema.ts";
import { ON_SESSION, WITH_BODY, type RouteContract } from "./route-contract.ts";
import { SyncStatusSchema } from "./sync-schema.ts";

export const SYNC_ROUTES: RouteContract[] = [
  {
    method: "post",
    path: "/sessions/{id}/flush",
    operationId: "flushSession",
    summary: "Upload local history and the latest checkpoint now",
    description: "Waits for the upload of what was local when called (at most 30 s). Without `persistence`: `422`.",
    tag: "sync",
    access: "manage",
    body: { schema: EmptySchema, optional: true },
    responses: { 200: { description: "The sync state after the upload.", json: SyncStatusSchema } },
    errors: [...WITH_BODY, ...ON_SESSION, 422, 429],
  },
  {
    method: "get",
    path: "/sessions/{id}/sync",
    operationId: "getSyncStatus",
    summary: "Get the sync state",
    description: "Without `persistence`: `422`.",
    tag: "sync",
    access: "token",
    responses: { 200: { description: "The sync state.", json: SyncStatusSchema } },
    errors: [...ON_SESSION, 422],
  },
  {
    method: "post",
    path: "/sessions/{id}/restore",
    operationId: "restoreSession",
    summary: "Restore a checkpoint from external storage",
    description:
      "Replaces settled local state with the named checkpoint; the session is `idle` afterwards. Running: `409`; unknown checkpoint: `404`; without `persistence`: `422`.",
    tag: "sync",
    access: "manage",
    body: { schema: RestoreSchema },
    responses: { 200: { description: "The restored session.", json: SessionSchema } },
    errors: [...WITH_BODY, ...ON_SESSION, 409, 422, 429],
  },
];
