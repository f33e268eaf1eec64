/** `/sessions` and `/sessions/{id}/*`: authorization here, state in the objects. */
import { Hono } from "hono";
import { CreateSessionSchema, EmptySchema, InputSchema, RestoreSchema } from "../shared/api-schema.ts";
import { forbidden, overloaded, unsupported, unwrap, type Result } from "../shared/errors.ts";
import type { ExecutorInfo } from "../shared/executor-protocol.ts";
import { log } from "../log.ts";
import { openStreams, type EndableStream } from "../streams/open-streams.ts";
import { isolateSlots } from "../streams/stream-slots.ts";
import { refuseInspection, requireManage, requireSessionAccess, requireToken, requireWrite } from "../http/auth.ts";
import { BODY_OVERHEAD_BYTES, parseBody, readBody } from "../http/body.ts";
import type { AppContext, AppEnv } from "../http/context.ts";
import { pageLimit, pathId } from "../http/params.ts";
import { openSessionStream } from "../http/sse-relay.ts";
import { refuseWhenDraining } from "../http/draining.ts";
import { chooseHomeRegion, fleetStatus, locationHint } from "../runner/fleet.ts";
import { prepareSession } from "../session/create.ts";
import { sessionObjectName } from "../session/session-object.ts";

export const sessions = new Hono<AppEnv>();

sessions.use("*", requireToken);

function bodyCap(c: AppContext): number {
  return c.get("runtime").config.limits.input_bytes + BODY_OVERHEAD_BYTES;
}

function sessionStub(c: AppContext, id: string) {
  return c.env.SESSIONS.getByName(sessionObjectName(c.get("principal").tenant, id));
}

/** Resolves `{id}` and checks the token may reach it (inspection tokens only where allowed). */
function target(c: AppContext, inspection = false): string {
  const id = pathId(c.req.param("id") ?? "");
  requireSessionAccess(c.get("principal"), id);
  if (!inspection) refuseInspection(c.get("principal"));
  return id;
}

sessions.post("/", async (c) => {
  const p = c.get("principal");
  requireManage(p);
  if (p.session !== undefined) throw forbidden("a session-scoped token cannot create sessions");
  await refuseWhenDraining(c);
  const body = parseBody(await readBody(c, bodyCap(c)), CreateSessionSchema);
  const { config } = c.get("runtime");
  const prepared = await prepareSession(c.get("runtime"), p.tenant, body, async (id) => {
    // The RPC typing maps JSON Schema records to never; the value is the object's ExecutorInfo.
    const r = (await c.env.EXECUTORS.getByName(id).info()) as unknown as Result<ExecutorInfo>;
    return r.ok ? r.value : undefined;
  });
  // The home region is fixed at creation: the object is created near it and placed there first.
  const region = chooseHomeRegion(await fleetStatus(c.env, config), prepared.harness);
  const stub = c.env.SESSIONS.getByName(sessionObjectName(p.tenant, prepared.id), { locationHint: locationHint(config, region) });
  const session = unwrap(await stub.create(prepared, region));
  return c.json(session, 201);
});

sessions.get("/", async (c) => {
  const p = c.get("principal");
  refuseInspection(p);
  const limit = pageLimit(c.req.query("limit"));
  const after = c.req.query("after") ?? "";
  const list = await c.env.TENANTS.getByName(p.tenant).list(after, limit, p.session);
  return c.json({ sessions: list });
});

sessions.get("/:id", async (c) => {
  const id = target(c, true);
  return c.json(unwrap(await sessionStub(c, id).get(c.get("principal").inspectCall)));
});

sessions.post("/:id/close", async (c) => {
  const id = target(c);
  requireManage(c.get("principal"));
  parseBody(await readBody(c, bodyCap(c)), EmptySchema, {});
  return c.json(unwrap(await sessionStub(c, id).close()), 202);
});

sessions.get("/:id/events", async (c) => {
  const id = target(c, true);
  const stub = sessionStub(c, id);
  const call = c.get("principal").inspectCall;
  if (wantsEventStream(c.req.header("Accept"))) {
    // A present `after` wins over Last-Event-ID, also when empty (docs/api.md "SSE").
    const after = c.req.query("after");
    const cursor = after ?? c.req.header("Last-Event-ID") ?? "";
    const { limits } = c.get("runtime").config;
    const budget = { events: limits.subscriber_events, bytes: limits.subscriber_bytes };
    // Streams opened after a shutdown ended the others would be cut when the runtime stops.
    if (openStreams.closing) throw overloaded("the service is shutting down");
    // limits.subscribers counts streams across the deployment; this isolate holds slots in blocks.
    const tenant = c.get("principal").tenant;
    const slots = isolateSlots(c.env);
    if (!(await slots.acquire(tenant))) throw overloaded("too many event streams are open");
    const hooks = {
      tick: () => background(c, slots.tick()),
      end: () => background(c, slots.release(tenant)),
      track: (stream: EndableStream) => openStreams.add(stream),
    };
    try {
      return await openSessionStream(stub, cursor, budget, c.req.raw.signal, call, hooks);
    } catch (e) {
      hooks.end();
      throw e;
    }
  }
  const limit = pageLimit(c.req.query("limit"));
  return c.json(unwrap(await stub.readEvents(c.req.query("after") ?? "", limit, call)));
});

sessions.post("/:id/events", async (c) => {
  const id = target(c);
  requireWrite(c.get("principal"));
  const input = parseBody(await readBody(c, bodyCap(c)), InputSchema);
  if (input.type === "user.message") await refuseWhenDraining(c);
  const traceparent = c.req.header("traceparent");
  return c.json(unwrap(await sessionStub(c, id).send(input, traceparent)), 202);
});

sessions.post("/:id/resume", async (c) => {
  const id = target(c);
  requireManage(c.get("principal"));
  parseBody(await readBody(c, bodyCap(c)), EmptySchema, {});
  return c.json(unwrap(await sessionStub(c, id).resume()));
});

/**
 * Flush, sync and restore need `persistence`. Without it they are `422 unsupported` (spec); with
 * it, this build has no uploader yet and says so the same way, after the usual checks.
 */
function persistenceUnsupported(c: AppContext): never {
  const configured = c.get("runtime").config.persistence !== null;
  throw unsupported(
    configured
      ? "flush, sync and restore are not available in this build of the service"
      : "flush, sync and restore need persistence in the host configuration",
  );
}

sessions.post("/:id/flush", async (c) => {
  const id = target(c);
  requireManage(c.get("principal"));
  parseBody(await readBody(c, bodyCap(c)), EmptySchema, {});
  unwrap(await sessionStub(c, id).get());
  persistenceUnsupported(c);
});

sessions.get("/:id/sync", async (c) => {
  const id = target(c);
  unwrap(await sessionStub(c, id).get());
  persistenceUnsupported(c);
});

sessions.post("/:id/restore", async (c) => {
  const id = target(c);
  requireManage(c.get("principal"));
  parseBody(await readBody(c, bodyCap(c)), RestoreSchema);
  unwrap(await sessionStub(c, id).get());
  persistenceUnsupported(c);
});

/** Work that must finish after the response (slot bookkeeping); failures are logged, never thrown. */
function background(c: AppContext, p: Promise<void> | undefined): void {
  if (!p) return;
  const logged = p.catch((e) => log("error", "stream slot sync failed", { error: String(e) }));
  try {
    c.executionCtx.waitUntil(logged);
  } catch {
    // No execution context (the app called directly): the promise still runs.
  }
}

function wantsEventStream(accept: string | undefined): boolean {
  return (accept ?? "").split(",").some((t) => t.trim().split(";")[0]!.toLowerCase() === "text/event-stream");
}
