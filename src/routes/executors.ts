/**
 * `/executors` (management token) and `/executors/{id}/*` (the executor's own token: `Authorization:
 * Bearer <token>` on HTTP, the `svc-auth.<token>` subprotocol on the RPC upgrade). Unknown id →
 * 404 before a wrong or missing token → 401; both are decided by the ExecutorObject, which holds
 * the token's digest.
 */
import { Hono } from "hono";
import { ExecutorRegistrationSchema, AUTH_SUBPROTOCOL_PREFIX, RPC_SUBPROTOCOL } from "../shared/executor-protocol.ts";
import { forbidden, invalid, ServiceError, unwrap, type ErrorBody } from "../shared/errors.ts";
import { newId, sha256Hex, toHex } from "../shared/ids.ts";
import { bearerToken, requireManage, requireToken } from "../http/auth.ts";
import { BODY_OVERHEAD_BYTES, parseBody, readBody } from "../http/body.ts";
import type { AppContext, AppEnv } from "../http/context.ts";
import { pathId } from "../http/params.ts";
import { openCommandStream } from "../sse/command-stream.ts";
import { takeStreamSlot } from "../streams/stream-slot.ts";
import { TOKEN_DIGEST_HEADER } from "../executor/executor-object.ts";
import { existingSession } from "../persistence/lookup.ts";

export const executors = new Hono<AppEnv>();

function bodyCap(c: AppContext): number {
  return c.get("runtime").config.limits.input_bytes + BODY_OVERHEAD_BYTES;
}

function executorStub(c: AppContext) {
  return c.env.EXECUTORS.getByName(pathId(c.req.param("id") ?? "", "executor"));
}

/** Digest of the presented executor token ("" digests to something no executor holds). */
function tokenDigest(token: string | undefined): Promise<string> {
  return sha256Hex(token ?? "");
}

executors.post("/", requireToken, async (c) => {
  const p = c.get("principal");
  requireManage(p);
  const body = parseBody(await readBody(c, bodyCap(c)), ExecutorRegistrationSchema);
  const session = body.session?.toLowerCase();
  // A session-scoped token reaches only its own session: it may rebind an executor there, nothing else.
  if (p.session !== undefined && session !== p.session) throw forbidden("a session-scoped token may only rebind executors of its own session");
  const id = newId();
  const token = toHex(crypto.getRandomValues(new Uint8Array(32)));
  const stub = c.env.EXECUTORS.getByName(id);
  unwrap(await stub.register({ id, tenant: p.tenant, binding: body.binding, tools: body.tools, tokenDigest: await sha256Hex(token) }));
  if (session !== undefined) {
    // Like every request naming a session: unknown anywhere is 404 with nothing written; a session
    // only in external storage is loaded first (src/persistence/lookup.ts).
    let r;
    try {
      const target = await existingSession(c.env, c.get("runtime"), p.tenant, session);
      r = await target.rebind(body.binding, body.tools, id);
    } catch (e) {
      await stub.discard();
      throw e;
    }
    if (!r.ok) {
      await stub.discard();
      unwrap(r);
    }
  }
  return c.json({ id, token }, 201);
});

/**
 * The body of a request to an executor. The object checks the id and token before it parses the
 * body; a body the Worker refuses itself (over the cap, cut short) waits for that check, so an
 * unknown executor is still `404` and a wrong token `401` (docs/api.md "Executor authentication").
 */
async function executorBody(c: AppContext, stub: ReturnType<typeof executorStub>, digest: string): Promise<string> {
  try {
    return await readBody(c, bodyCap(c));
  } catch (e) {
    unwrap(await stub.tenantFor(digest));
    throw e;
  }
}

executors.post("/:id/close", async (c) => {
  const stub = executorStub(c);
  const digest = await tokenDigest(bearerToken(c.req.header("Authorization")));
  return c.json(unwrap(await stub.close(digest, await executorBody(c, stub, digest))));
});

executors.post("/:id/responses", async (c) => {
  const stub = executorStub(c);
  const digest = await tokenDigest(bearerToken(c.req.header("Authorization")));
  return c.json(unwrap(await stub.reply(digest, await executorBody(c, stub, digest))));
});

executors.get("/:id/commands", async (c) => {
  const stub = executorStub(c);
  const digest = await tokenDigest(bearerToken(c.req.header("Authorization")));
  // The token first (404, 401), then the stream's slot (429): a refused stream never reaches the
  // object, so it does not replace the executor's live connection.
  const tenant = unwrap(await stub.tenantFor(digest));
  const hooks = await takeStreamSlot(c, tenant);
  try {
    return await openCommandStream(stub, { [TOKEN_DIGEST_HEADER]: digest }, c.req.raw.signal, hooks);
  } catch (e) {
    hooks.end();
    throw e;
  }
});

executors.get("/:id/rpc", async (c) => {
  // Browsers always send Origin on a WebSocket upgrade; an executor is a server-side client.
  if (c.req.header("Origin") !== undefined) throw forbidden("browser origins may not connect to an executor");
  if (c.req.header("Upgrade")?.toLowerCase() !== "websocket") throw invalid("expected a WebSocket upgrade");
  // Checked here so the answer is ours (error shape, request id): the runtime would refuse these
  // itself at the 101, in plain text.
  if (c.req.header("Sec-WebSocket-Version") !== "13") {
    throw new ServiceError("invalid_request", "Sec-WebSocket-Version must be 13", 400, { "Sec-WebSocket-Version": "13" });
  }
  if (!/^[A-Za-z0-9+/]{22}==$/.test(c.req.header("Sec-WebSocket-Key") ?? "")) {
    throw invalid("Sec-WebSocket-Key must be 16 bytes in base64");
  }
  const offered = (c.req.header("Sec-WebSocket-Protocol") ?? "").split(",").map((s) => s.trim());
  if (!offered.includes(RPC_SUBPROTOCOL)) throw invalid(`the ${RPC_SUBPROTOCOL} subprotocol is required`);
  const auth = offered.find((s) => s.startsWith(AUTH_SUBPROTOCOL_PREFIX))?.slice(AUTH_SUBPROTOCOL_PREFIX.length);
  // The id (its form, then the executor) is looked at only after the handshake: docs/api.md.
  const res = await executorStub(c).fetch("https://executor/rpc", { headers: { Upgrade: "websocket", [TOKEN_DIGEST_HEADER]: await tokenDigest(auth) } });
  if (res.status !== 101) throw ServiceError.from((await res.json()) as ErrorBody);
  return res;
});
