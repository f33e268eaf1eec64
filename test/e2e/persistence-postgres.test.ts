/**
 * `persistence.postgres_env`: the session index mirrored to PostgreSQL (Debian's server, started
 * here) lets another deployment that shares the database and the storage discover a tenant's
 * sessions and load them.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call } from "../helpers/api.ts";
import { allEvents, baseEnv, createSession, stackConfig, TOKEN, turn, uncursored } from "../helpers/persistence.ts";
import { startPostgres, type Postgres } from "../helpers/postgres.ts";
import { startStack } from "../helpers/stack.ts";

let provider: ScriptedProvider;
let postgres: Postgres;

/** Installing Debian's postgresql when it is missing (CI) takes longer than a usual hook. */
const INSTALL_MS = 300_000;

beforeAll(async () => {
  provider = await startScriptedProvider();
  postgres = await startPostgres();
}, INSTALL_MS);
afterAll(async () => {
  await provider?.close();
  postgres?.stop();
});

it("another deployment discovers a tenant's sessions through the PostgreSQL mirror and loads them from storage", async () => {
  const store = path.join(mkdtempSync(path.join(tmpdir(), "svc-pgstore-")), "store");
  const persistence = { provider: "filesystem", directory: store, postgres_env: "PG_URL", interval_seconds: 1 };
  const env = { ...baseEnv, PG_URL: postgres.url };
  const first = await startStack({ config: stackConfig(provider, persistence), env });
  let id: string;
  let events: unknown[];
  try {
    const s = await createSession(first.url);
    id = s.id;
    await turn(first.url, s, "mirror me");
    const mark = first.mark();
    expect((await call(first.url, "POST", `/sessions/${id}/flush`, { token: TOKEN })).body.pending).toBe(false);
    await first.waitForLog(/"msg":"tenant index mirrored"/, 20_000, mark);
    events = await allEvents(first.url, id);
    s.sse.close();
  } finally {
    await first.stop();
  }

  const client = new pg.Client({ connectionString: postgres.url });
  await client.connect();
  const rows = (await client.query("SELECT tenant, id, body FROM svc_sessions WHERE id = $1", [id])).rows;
  await client.end();
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({ tenant: "t", id, body: { id, harness: "pi", status: "idle" } });

  const other = await startStack({ config: stackConfig(provider, persistence), env });
  try {
    const list = await call(other.url, "GET", "/sessions", { token: TOKEN });
    expect(list.status).toBe(200);
    expect(list.body.sessions.map((x: { id: string }) => x.id)).toContain(id);
    expect((await call(other.url, "GET", `/sessions/${id}`, { token: TOKEN })).status).toBe(200);
    expect(uncursored(await allEvents(other.url, id))).toEqual(uncursored(events));
  } finally {
    await other.stop();
  }
});
