/** Worker entry: the HTTP app and the object classes. */
import { app } from "./app.ts";

export default app;
export { SyncBacklog } from "./persistence/backlog-object.ts";
export { RunnerPool } from "./runner/runner-pool.ts";
export { SessionObject } from "./session/session-object.ts";
export { TenantObject } from "./tenant/tenant-object.ts";
