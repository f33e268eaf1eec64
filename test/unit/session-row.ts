/** A session row as the SessionObject's SQLite holds it (src/session/record.ts), for the session modules' unit tests. */
import type { SessionRow } from "../../src/session/record.ts";

export function sessionRow(patch: Partial<SessionRow> = {}): SessionRow {
  return {
    id: "0123456789abcdef0123456789abcdef",
    tenant: "acme",
    harness: "pi",
    config: JSON.stringify({ model: "openai/gpt-4o-mini" }),
    status: "idle",
    created_at: "2026-01-01T00:00:00.000Z",
    updated_at: "2026-01-01T00:00:00.000Z",
    descriptors: "[]",
    checkpoint: null,
    credential_bindings: null,
    cursor_key: "k".repeat(64),
    epoch: 0,
    log_bytes: 0,
    version: 1,
    indexed_version: 0,
    lease: 0,
    link_state: "none",
    up_seq: 0,
    down_seq: 0,
    link_lost_at: null,
    bindings: "[]",
    ...patch,
  };
}
