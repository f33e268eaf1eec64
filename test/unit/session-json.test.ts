/**
 * The session summary the tenant index stores (src/session/record.ts `sessionJson`): the JSON text
 * of `toSession(row)`, exactly, spliced from the row's own JSON columns.
 */
import { describe, expect, it } from "vitest";
import { sessionJson, toSession, type SessionRow } from "../../src/session/record.ts";

function row(over: Partial<SessionRow> = {}): SessionRow {
  return {
    id: "0123456789abcdef0123456789abcdef",
    tenant: "acme",
    harness: "pi",
    config: JSON.stringify({ model: "openai/gpt-4o-mini", instructions: "Say \"hi\"\n\tand ünïcödé ✓ \u2028", tools: [{ type: "mcp", name: "x" }], metadata: { a: [1, 2.5, -0, null, true] } }),
    status: "running",
    created_at: "2026-11-27T19:00:00.000Z",
    updated_at: "2026-11-27T19:00:01.000Z",
    descriptors: JSON.stringify([{ name: "lookup", description: "finds", parameters: { type: "object", properties: {} } }]),
    checkpoint: null,
    credential_bindings: null,
    cursor_key: "k".repeat(64),
    epoch: 1,
    log_bytes: 10,
    version: 7,
    indexed_version: 6,
    lease: 1,
    link_state: "open",
    up_seq: 0,
    down_seq: 0,
    link_lost_at: null,
    bindings: "[]",
    ...over,
  };
}

describe("the session summary pushed to the tenant index", () => {
  it.each([
    ["neither a checkpoint nor credential bindings", {}],
    ["a checkpoint", { checkpoint: JSON.stringify({ id: "cp_1", offset: 123, time: "2026-11-27T19:00:02.000Z" }) }],
    ["credential bindings", { credential_bindings: JSON.stringify(["github", "db"]) }],
    ["both, in a closed session with no tools", { checkpoint: JSON.stringify({ id: "cp_2", offset: 0, time: "t" }), credential_bindings: JSON.stringify(["a"]), status: "closed" as const, descriptors: "[]" }],
  ])("is the JSON text of the session as the API shows it, with %s", (_, over) => {
    const r = row(over);
    expect(sessionJson(r)).toBe(JSON.stringify(toSession(r)));
  });
});
