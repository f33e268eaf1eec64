/**
 * `persistence.postgres_env`: the session index mirrored to PostgreSQL (Debian's server, started
 * here) lets another deployment that shares the database and the storage discover a tenant's
 * sessions and load them.
 */
import { mkdtempSync } from "node:fs";
import net, { type AddressInfo } from "node:net";
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
  const client = new pg.Client({ connectionString: postgres.url });
  await client.connect();
  /** The session's mirror row; none before the first push has made the table (42P01: no such table). */
  const mirrored = () =>
    client.query("SELECT tenant, id, body FROM svc_sessions WHERE id = $1", [id]).then(
      (r) => r.rows,
      (e: { code?: string }) => (e.code === "42P01" ? [] : Promise.reject(e)),
    );
  let id: string;
  let events: unknown[];
  let rows: { tenant: string; id: string; body: { status: string } }[];
  try {
    const s = await createSession(first.url);
    id = s.id;
    await turn(first.url, s, "mirror me");
    expect((await call(first.url, "POST", `/sessions/${id}/flush`, { token: TOKEN })).body.pending).toBe(false);
    // Pushes to the mirror trail the index (a push of the running status can land after the turn
    // ended): each one is logged, and the one carrying the ended turn comes.
    for (;;) {
      const mark = first.mark();
      rows = await mirrored();
      if (rows[0]?.body.status === "idle") break;
      await first.waitForLog(/"msg":"tenant index mirrored"/, 20_000, mark);
    }
    events = await allEvents(first.url, id);
    s.sse.close();
  } finally {
    await client.end();
    await first.stop();
  }
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({ tenant: "t", id, body: { id, harness: "pi", status: "idle" } });

  const other = await startStack({ config: stackConfig(provider, persistence), env });
  try {
    const list = await call(other.url, "GET", "/sessions", { token: TOKEN });
    expect(list.status).toBe(200);
    expect(list.body.sessions.map((x: { id: string }) => x.id)).toContain(id);
    expect((await call(other.url, "GET", `/sessions/${id}`, { token: TOKEN })).status).toBe(200);
    expect(uncursored(await allEvents(other.url, id))).toEqual(uncursored(events));
    // Closed where it was loaded: that deployment counts the session's versions anew (fewer than
    // the first one's), and its newer row is still the one listed and mirrored.
    const mark = other.mark();
    expect((await call(other.url, "POST", `/sessions/${id}/close`, { token: TOKEN })).status).toBe(202);
    await other.waitForLog(/"msg":"tenant index mirrored"/, 20_000, mark);
    const listed = (await call(other.url, "GET", "/sessions", { token: TOKEN })).body.sessions.find((x: { id: string }) => x.id === id);
    expect(listed.status).toBe("closed");
    const check = new pg.Client({ connectionString: postgres.url });
    await check.connect();
    const mirrored = (await check.query("SELECT body FROM svc_sessions WHERE id = $1", [id])).rows;
    await check.end();
    expect(mirrored[0].body.status).toBe("closed");
  } finally {
    await other.stop();
  }
});

it("a mirror that accepts connections and never answers: the list answers within the mirror's bound, from this deployment's index", async () => {
  const silent = net.createServer(() => {}); // accepts, says nothing
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  const store = path.join(mkdtempSync(path.join(tmpdir(), "svc-pgstore-")), "store");
  const persistence = { provider: "filesystem", directory: store, postgres_env: "PG_URL" };
  const env = { ...baseEnv, PG_URL: `postgres://u:p@127.0.0.1:${(silent.address() as AddressInfo).port}/db` };
  const stack = await startStack({ config: stackConfig(provider, persistence), env });
  try {
    const s = await createSession(stack.url);
    s.sse.close();
    const list = await call(stack.url, "GET", "/sessions", { token: TOKEN });
    expect(list.status).toBe(200);
    expect(list.body.sessions.map((x: { id: string }) => x.id)).toEqual([s.id]);
    // The Worker's log line travels through the stack's stderr, which may come after the answer.
    await stack.waitForLog(/"msg":"session mirror unreachable; listing this deployment's sessions".*did not answer within 5 s/, 10_000);
  } finally {
    await stack.stop();
    silent.close();
  }
});
