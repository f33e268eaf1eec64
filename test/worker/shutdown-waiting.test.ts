/**
 * The local stack's shutdown (`POST /internal/drain?waiting=end`, docs/api.md "Shutdown and
 * readiness": shutdown interrupts queued input): a session whose message waits in the RunnerPool for a
 * runner-host ends that input with `conflict` and turns `interrupted`. Its own file: a drain
 * marks the whole isolate as shutting down.
 */
import { createExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app.ts";
import type { Env } from "../../src/env.ts";
import type { EventList } from "../../src/shared/api-schema.ts";
import { api, BASE, createSession, env, sendMessage } from "./helpers.ts";

const RUNNER_SECRET = "runner-secret-0123456789abcdef-drain";
const withRunners = {
  ...env,
  RUNNER_SECRET,
  HOST_CONFIG: JSON.stringify({ ...JSON.parse(env.HOST_CONFIG!), runners: { token_env: "RUNNER_SECRET" } }),
} as Env;

const drain = (query: string) =>
  Promise.resolve(app.fetch(new Request(`${BASE}/internal/drain${query}`, { method: "POST", headers: { Authorization: `Bearer ${RUNNER_SECRET}` } }), withRunners, createExecutionContext()));

async function events(id: string): Promise<[string, unknown, string | undefined][]> {
  const page = (await (await api(`/sessions/${id}/events`)).json()) as EventList;
  return page.events.map((e) => [e.type, (e.data as { code?: string; status?: string }).code ?? (e.data as { status?: string }).status, e.input_id]);
}

describe("shutdown of the whole stack", () => {
  it("ends the queued input of a session still waiting for a runner-host: conflict before execution, then interrupted", async () => {
    const waiting = await createSession();
    const idle = await createSession();
    const m = await sendMessage(waiting.id, "no runner-host has taken this yet");
    // No runner-host is connected: the session waits in the pool, its message queued.
    expect((await (await api(`/sessions/${waiting.id}`)).json()) as { status: string }).toMatchObject({ status: "idle" });

    const res = await drain("?waiting=end");
    expect(res.status).toBe(200);
    expect(await events(waiting.id)).toEqual([
      ["user.message", undefined, undefined],
      ["session.error", "conflict", m.id],
      ["session.status", "interrupted", undefined],
    ]);
    const page = (await (await api(`/sessions/${waiting.id}/events`)).json()) as EventList;
    expect(page.events[1]!.data).toEqual({ code: "conflict", message: "the queued input was interrupted before execution: the service is shutting down" });
    expect((await (await api(`/sessions/${waiting.id}`)).json()) as { status: string }).toMatchObject({ status: "interrupted" });
    // A session with nothing queued is left as it was.
    expect(await events(idle.id)).toEqual([]);
    expect((await (await api(`/sessions/${idle.id}`)).json()) as { status: string }).toMatchObject({ status: "idle" });
  });
});
