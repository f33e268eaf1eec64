/** Worker entry: the HTTP app and the object classes. */
import { app } from "./app.ts";

export default app;
export { ExecutorObject } from "./executor/executor-object.ts";
export { SyncBacklog } from "./persistence/backlog-object.ts";
export { RunnerPool } from "./runner/runner-pool.ts";
export { SessionObject } from "./session/session-object.ts";
export { StreamGate } from "./streams/stream-gate.ts";
export { TenantObject } from "./tenant/tenant-object.ts";
