/**
 * The local stack's shutdown in the Worker (docs/api.md "Shutdown and readiness": the service ends
 * open event streams): `POST /internal/streams/end` ends every stream of the isolate after the events
 * its object already sent, answers once they are over, and new streams get `429` from then on.
 * A file of its own: the isolate stays closing afterwards.
 */
import { createExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app.ts";
import type { Env } from "../../src/env.ts";
import type { Event, Session } from "../../src/shared/api-schema.ts";
import { BASE, createBody, env, expectApiError, sseReader, tokens } from "./helpers.ts";

const RUNNER_SECRET = "shutdown-runner-secret-0123456789abcdef";
/** The pool's configuration with a runner secret of its own (the runtime is cached per config text). */
const e = {
  ...env,
  SHUTDOWN_RUNNER_SECRET: RUNNER_SECRET,
  HOST_CONFIG: JSON.stringify({ ...JSON.parse(env.HOST_CONFIG!), runners: { token_env: "SHUTDOWN_RUNNER_SECRET" } }),
} as Env;

function call(path: string, init: RequestInit & { token?: string } = {}): Promise<Response> {
  const { token = tokens.manage, ...rest } = init;
  const headers = new Headers(rest.headers);
  headers.set("Authorization", `Bearer ${token}`);
  if (rest.body !== undefined) headers.set("Content-Type", "application/json");
  return Promise.resolve(app.fetch(new Request(`${BASE}${path}`, { ...rest, headers }), e, createExecutionContext()));
}

async function send(id: string, text: string): Promise<Event> {
  const res = await call(`/sessions/${id}/events`, { method: "POST", body: JSON.stringify({ type: "user.message", text }) });
  expect(res.status).toBe(202);
  return (await res.json()) as Event;
}

const stream = (id: string) => call(`/sessions/${id}/events`, { headers: { Accept: "text/event-stream" } });

describe("shutdown: open event streams end", () => {
  it("each stream gets the events already published, then ends; the answer counts it; new streams get 429", async () => {
    const created = await call("/sessions", { method: "POST", body: JSON.stringify(createBody()) });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as Session;
    const res = await stream(id);
    expect(res.status).toBe(200);
    const frames = sseReader(res.body!);
    const first = await send(id, "first");
    expect(JSON.parse((await frames.next("the first message"))!.data!).id).toBe(first.id);

    await expectApiError(await call("/internal/streams/end", { method: "POST", token: tokens.manage }), 401, "forbidden");
    // Published right before the end is asked for: it still reaches the client before the end.
    const last = await send(id, "last");
    const ending = call("/internal/streams/end", { method: "POST", token: RUNNER_SECRET });
    expect(JSON.parse((await frames.next("the last message"))!.data!).id).toBe(last.id);
    expect(await frames.next("the end of the stream")).toBeUndefined();
    const answer = await ending;
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ ended: 1, cut: 0, unanswered: 0 });

    const refused = await expectApiError(await stream(id), 429, "overloaded");
    expect(refused.message).toMatch(/shutting down/);
  });
});
