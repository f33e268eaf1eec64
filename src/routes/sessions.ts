/** `/sessions` and `/sessions/{id}/*`: authorization here, state in the objects. */
import { Hono } from "hono";
import { CreateSessionSchema, EmptySchema, InputSchema, RestoreSchema, type Session, type SessionList } from "../shared/api-schema.ts";
import { forbidden, invalid, unsupported, unwrap, type Result } from "../shared/errors.ts";
import type { ExecutorInfo } from "../shared/executor-protocol.ts";
import { isId } from "../shared/ids.ts";
import { log } from "../log.ts";
import { takeStreamSlot } from "../streams/stream-slot.ts";
import { refuseInspection, requireManage, requireSessionAccess, requireToken, requireWrite } from "../http/auth.ts";
import { BODY_OVERHEAD_BYTES, parseBody, readBody } from "../http/body.ts";
import type { AppContext, AppEnv } from "../http/context.ts";
import { pageLimit, pathId, queryParam } from "../http/params.ts";
import { openSessionStream } from "../sse/session-stream.ts";
import { isDraining, refuseWhenDraining } from "../http/draining.ts";
import { chooseHomeRegion, fleetStatus, locationHint } from "../runner/fleet.ts";
import { prepareSession, requireHarness } from "../session/create.ts";
import { sessionObjectName } from "../session/object-name.ts";
import { existingSession, reserveSession } from "../persistence/lookup.ts";
import { mergePages, mirrorConnection, mirrorList, type MirrorRow } from "../persistence/pg-mirror.ts";

export const sessions = new Hono<AppEnv>();

sessions.use("*", requireToken);

function bodyCap(c: AppContext): number {
  return c.get("runtime").config.limits.input_bytes + BODY_OVERHEAD_BYTES;
}

/** The session's object; an id that exists nowhere is `404` without anything being written. */
/** A list page as answered: `next_after` when it stopped for its size (docs/api.md "Sessions"). */
function sessionList(page: { sessions: Session[]; cut: boolean }): SessionList {
  const last = page.sessions.at(-1);
  return page.cut && last ? { sessions: page.sessions, next_after: last.id } : { sessions: page.sessions };
}

function sessionStub(c: AppContext, id: string) {
  return existingSession(c.env, c.get("runtime"), c.get("principal").tenant, id);
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
  const body = parseBody(await readBody(c, bodyCap(c)), CreateSessionSchema, undefined, (b) => {
    if (typeof b.harness === "string") requireHarness(c.get("runtime"), b.harness);
  });
  const { config } = c.get("runtime");
  const prepared = await prepareSession(c.get("runtime"), p.tenant, body, async (id) => {
    // The RPC typing maps JSON Schema records to never; the value is the object's ExecutorInfo.
    const r = (await c.env.EXECUTORS.getByName(id).info()) as unknown as Result<ExecutorInfo>;
    return r.ok ? r.value : undefined;
  });
  // The home region is fixed at creation: the object is created near it and placed there first.
  const region = chooseHomeRegion(await fleetStatus(c.env, config), prepared.harness);
  // The id is reserved in the tenant index before its object is addressed (src/persistence/lookup.ts).
  await reserveSession(c.env, p.tenant, prepared.id);
  const stub = c.env.SESSIONS.getByName(sessionObjectName(p.tenant, prepared.id), { locationHint: locationHint(config, region) });
  const session = unwrap(await stub.create(prepared, region));
  return c.json(session, 201);
});

sessions.get("/", async (c) => {
  const p = c.get("principal");
  refuseInspection(p);
  const limit = pageLimit(queryParam(c, "limit"));
  // Ids are lowercase hex and accepted in either case (docs/api.md), so `after` is compared lowercased.
  // Anything else is no position in the list: `%FF` would sort before every id and page 1 came back.
  const after = (queryParam(c, "after") ?? "").toLowerCase();
  if (after !== "" && !isId(after)) throw invalid("after: must be the id of the previous page's last session (32 hex) or empty");
  const index = c.env.TENANTS.getByName(p.tenant);
  const conn = mirrorConnection(c.env, c.get("runtime"));
  if (!conn) return c.json(sessionList(await index.list(after, limit, p.session)));
  // With the PostgreSQL mirror, sessions of other deployments sharing it are listed too.
  const local = await index.listRows(after, limit, p.session);
  let shared: MirrorRow[] = [];
  try {
    shared = await mirrorList(conn, p.tenant, after, limit, p.session);
  } catch (e) {
    log("warn", "session mirror unreachable; listing this deployment's sessions", { error: String(e) });
  }
  return c.json(sessionList(mergePages(local, shared, limit)));
});

sessions.get("/:id", async (c) => {
  const id = target(c, true);
  return c.json(unwrap(await (await sessionStub(c, id)).get(c.get("principal").inspectCall)));
});

sessions.post("/:id/close", async (c) => {
  const id = target(c);
  requireManage(c.get("principal"));
  const stub = await sessionStub(c, id);
  parseBody(await readBody(c, bodyCap(c)), EmptySchema, {});
  return c.json(unwrap(await stub.close()), 202);
});

sessions.get("/:id/events", async (c) => {
  const id = target(c, true);
  // Checked in both modes, so a bad `limit` is `400` whichever the client asked for.
  const limit = pageLimit(queryParam(c, "limit"));
  const stub = await sessionStub(c, id);
  const call = c.get("principal").inspectCall;
  if (wantsEventStream(c.req.header("Accept"))) {
    // A present `after` wins over Last-Event-ID, also when empty (docs/api.md "SSE").
    const after = queryParam(c, "after");
    const cursor = after ?? c.req.header("Last-Event-ID") ?? "";
    const { limits } = c.get("runtime").config;
    const budget = { events: limits.subscriber_events, bytes: limits.subscriber_bytes };
    const hooks = await takeStreamSlot(c, c.get("principal").tenant);
    try {
      return await openSessionStream(stub, cursor, budget, c.req.raw.signal, call, hooks);
    } catch (e) {
      hooks.end();
      throw e;
    }
  }
  return c.json(unwrap(await stub.readEvents(queryParam(c, "after") ?? "", limit, call)));
});

sessions.post("/:id/events", async (c) => {
  const id = target(c);
  requireWrite(c.get("principal"));
  const stub = await sessionStub(c, id);
  const input = parseBody(await readBody(c, bodyCap(c)), InputSchema);
  // While shutting down a new message is refused; a repeated key still gets its original event
  // (the object tells them apart).
  const draining = input.type === "user.message" && (await isDraining(c));
  const traceparent = c.req.header("traceparent");
  return c.json(unwrap(await stub.send(input, traceparent, draining)), 202);
});

sessions.post("/:id/resume", async (c) => {
  const id = target(c);
  requireManage(c.get("principal"));
  const stub = await sessionStub(c, id);
  parseBody(await readBody(c, bodyCap(c)), EmptySchema, {});
  return c.json(unwrap(await stub.resume()));
});

/** Flush, sync and restore need `persistence` (docs/api.md "Flush, sync, restore": `422` without it). */
function requirePersistence(c: AppContext): void {
  if (c.get("runtime").config.persistence === null) {
    throw unsupported("flush, sync and restore need persistence in the host configuration");
  }
}

sessions.post("/:id/flush", async (c) => {
  const id = target(c);
  requireManage(c.get("principal"));
  const stub = await sessionStub(c, id);
  parseBody(await readBody(c, bodyCap(c)), EmptySchema, {});
  requirePersistence(c);
  return c.json(unwrap(await stub.flush()));
});

sessions.get("/:id/sync", async (c) => {
  const id = target(c);
  const stub = await sessionStub(c, id);
  requirePersistence(c);
  return c.json(unwrap(await stub.syncStatus()));
});

sessions.post("/:id/restore", async (c) => {
  const id = target(c);
  requireManage(c.get("principal"));
  const stub = await sessionStub(c, id);
  const body = parseBody(await readBody(c, bodyCap(c)), RestoreSchema);
  requirePersistence(c);
  return c.json(unwrap(await stub.restore(body.checkpoint.toLowerCase())));
});

/**
 * SSE mode when `Accept` lists `text/event-stream` with a non-zero `q` (`q=0` is "not acceptable",
 * RFC 9110) and no `application/json` range with a higher one; JSON otherwise.
 */
function wantsEventStream(accept: string | undefined): boolean {
  let sse = 0;
  let json = 0;
  for (const range of (accept ?? "").split(",")) {
    const [type, ...params] = range.split(";").map((p) => p.trim().toLowerCase());
    const qParam = params.find((p) => p.startsWith("q="));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    if (!(q >= 0 && q <= 1)) continue; // not a q-value (RFC 9110: 0 to 1): the range is ignored
    if (type === "text/event-stream") sse = Math.max(sse, q);
    else if (type === "application/json") json = Math.max(json, q);
  }
  return sse > 0 && sse >= json;
}
