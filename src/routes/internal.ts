/**
 * Runner-host dial-in, and the operator's status check. The runner secret travels as a bearer
 * token; a socket is accepted by the object it is forwarded to. A control socket states its
 * protocol version and region in the query: a runner-host speaking another version, or announcing
 * a region the configuration does not list, is refused with `409` and a message saying which.
 */
import { Hono } from "hono";
import { conflict, invalid, unauthorized } from "../shared/errors.ts";
import { sameDigest } from "../shared/digest.ts";
import { ID_PATTERN, sha256Hex } from "../shared/ids.ts";
import { RUNNER_PROTOCOL } from "../shared/runner-protocol.ts";
import { bearerToken } from "../http/auth.ts";
import type { AppContext, AppEnv } from "../http/context.ts";
import { log } from "../log.ts";
import { fleetStatus } from "../runner/fleet.ts";
import { configuredRegions, poolName } from "../runner/pool-name.ts";
import { openStreams } from "../streams/open-streams.ts";
import { inFlight } from "../http/in-flight.ts";
import { beginShutdown } from "../http/draining.ts";
import { STREAM_END_MS } from "../runtime-constants.ts";
import { REGION_HEADER } from "../runner/runner-pool.ts";
import { sessionObjectName } from "../session/session-object.ts";

export const internal = new Hono<AppEnv>();

/**
 * Refusals logged at most once per this many ms, each line counting those since the last: an
 * operator's clue when a runner-host was given the wrong secret, which anyone could otherwise
 * turn into one log line per request.
 */
const REFUSAL_LOG_MS = 10_000;
let refusalLogged = -Infinity;
let refusedSince = 0;

/** `METHOD path` of each route below (HEAD as GET), so an unknown one is `404` before the secret is asked. */
let routes: Set<string> | undefined;
const PREFIX = "/internal";

internal.use("*", async (c, next) => {
  routes ??= new Set(internal.routes.filter((r) => r.method !== "ALL").map((r) => `${r.method} ${r.path}`));
  const method = c.req.method === "HEAD" ? "GET" : c.req.method;
  if (!routes.has(`${method} ${c.req.path.slice(PREFIX.length)}`)) return next(); // no handler: the app's 404
  const token = bearerToken(c.req.header("Authorization"));
  const digest = c.get("runtime").runnerDigest;
  if (token === undefined || !digest || !sameDigest(await sha256Hex(token), digest)) {
    refusedSince++;
    if (Date.now() - refusalLogged >= REFUSAL_LOG_MS) {
      log("warn", "internal request refused: the runner secret is missing or wrong", { path: c.req.path, presented: token !== undefined, refused: refusedSince });
      refusalLogged = Date.now();
      refusedSince = 0;
    }
    throw unauthorized("runner secret is missing or wrong");
  }
  await next();
});

/**
 * Both of a runner-host's sockets state its protocol version: a runner-host of another release is
 * refused on its control socket and on every session link it still holds, so it runs no turn of
 * this Worker's (a link of its that survived the deploy redials and is refused; 409 ends the lease).
 */
function requireProtocol(c: AppContext, socket: "control" | "link"): void {
  const protocol = c.req.query("protocol") ?? "";
  if (protocol === String(RUNNER_PROTOCOL)) return;
  log("warn", "runner-host refused: protocol version mismatch", { socket, runner_protocol: protocol || "none", service_protocol: RUNNER_PROTOCOL });
  throw conflict(
    `runner protocol ${protocol || "(none)"} is not supported: this service speaks ${RUNNER_PROTOCOL}; ` +
      "run a runner-host of the same release as the Worker",
  );
}

internal.get("/runners/control", (c) => {
  requireProtocol(c, "control");
  const region = c.req.query("region") ?? "";
  const regions = configuredRegions(c.get("runtime").config);
  if (!regions.includes(region)) {
    log("warn", "runner-host refused: unknown region", { region });
    throw conflict(`region "${region}" is not configured (runners.regions: ${regions.join(", ")})`);
  }
  const headers = new Headers(c.req.raw.headers);
  headers.set(REGION_HEADER, region);
  return c.env.RUNNERS.getByName(poolName(region)).fetch(new Request(c.req.raw, { headers }));
});

/** `?protocol=<n>&session=<object name>&lease=<n>`: a runner-host's link to one attached session. */
internal.get("/runners/link", (c) => {
  requireProtocol(c, "link");
  const name = c.req.query("session") ?? "";
  const lease = c.req.query("lease") ?? "";
  // The object name is `<session id>:<tenant>` (sessionObjectName).
  const id = name.slice(0, 32);
  const tenant = name.slice(33);
  if (!ID_PATTERN.test(id) || name[32] !== ":" || tenant === "" || !/^[1-9][0-9]{0,15}$/.test(lease)) {
    throw invalid("session and lease are required");
  }
  const stub = c.env.SESSIONS.getByName(sessionObjectName(tenant, id));
  return stub.fetch(`https://session/link?lease=${lease}`, { headers: { Upgrade: "websocket" } });
});

/**
 * `GET /internal/status` (runner secret): what an operator checks after a deploy. Where the host
 * configuration came from, the variables it names that this Worker lacks (names and reasons, never
 * values), and each region's runner-hosts, asked fresh.
 */
internal.get("/status", async (c) => {
  const rt = c.get("runtime");
  return c.json({
    config: { source: rt.source },
    missing: rt.envProblems,
    protocol: RUNNER_PROTOCOL,
    regions: await fleetStatus(c.env, rt.config, 0),
  });
});

/**
 * `POST /internal/drain` (DRAIN_PATH, runner secret): the local stack's first step on a signal.
 * From then on this isolate refuses new sessions, messages and streams (`429`) and readiness is
 * `503`, while the runner-host interrupts the running turns. `?waiting=end` (a stack with its own
 * runner-host) also ends the queued input of sessions the RunnerPools hold waiting for room.
 */
internal.post("/drain", async (c) => {
  beginShutdown();
  log("info", "shutting down: new work is refused");
  if (c.req.query("waiting") === "end") {
    // The whole stack stops: input still waiting for a runner-host ends as a shutdown ends it.
    const regions = configuredRegions(c.get("runtime").config);
    const ended = await Promise.all(regions.map((r) => c.env.RUNNERS.getByName(poolName(r)).endWaiting("the service is shutting down")));
    log("info", "sessions waiting for a runner-host interrupted", { sessions: ended.reduce((a, b) => a + b, 0) });
  }
  return c.json({ status: "draining" });
});

/**
 * `POST /internal/streams/end` (END_STREAMS_PATH, runner secret): the local stack's shutdown, once its runner-host
 * has drained. Every event stream of this isolate gets what its object already sent (the
 * interrupted turns' events) and ends; new streams get `429` from then on. Meanwhile the requests
 * still being answered (a flush's upload round, a load) finish. Answers when both are over, or
 * after STREAM_END_MS, with how many streams ended cleanly and how many were cut, and how many
 * requests were still unanswered.
 */
internal.post("/streams/end", async (c) => {
  const [streams, requests] = await Promise.all([openStreams.endAll(STREAM_END_MS), inFlight.settled(STREAM_END_MS)]);
  return c.json({ ...streams, unanswered: requests.left });
});
