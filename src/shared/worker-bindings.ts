/**
 * The Worker's own binding names, one list for both ends: the local stack binds them
 * (runner-host/cli/local-stack.ts) and the host configuration may not give its variables these
 * names (src/shared/config-fields.ts), since every variable it names becomes a binding of the same
 * name. test/unit/wrangler-config.test.ts keeps them in step with wrangler.toml.
 * Pure data: imported by the Worker and by Node.
 */

/** Durable Object bindings and their classes. */
export const DURABLE_OBJECTS = {
  SESSIONS: "SessionObject",
  TENANTS: "TenantObject",
  RUNNERS: "RunnerPool",
  EXECUTORS: "ExecutorObject",
  STREAMS: "StreamGate",
  SYNC_BACKLOG: "SyncBacklog",
} as const;

/**
 * Every binding of the Worker's own: the objects, wrangler.toml's bucket, and what the local stack
 * binds besides (the configuration's text and its Node services).
 */
export const WORKER_BINDINGS: readonly string[] = [...Object.keys(DURABLE_OBJECTS), "PERSISTENCE", "HOST_CONFIG", "PERSISTENCE_FS", "LOCAL_DISK"];
