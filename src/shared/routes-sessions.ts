/** Contract of `/sessions` and `/sessions/{id}/*` except sync (routes-sync.ts). */
import * as z from "zod";
import {
  CreateSessionSchema,
  EmptySchema,
  InputSchema,
  SessionListSchema,
  SessionSchema,
  StatusSchema,
} from "./api-schema.ts";
import { Cursor } from "./contract-registry.ts";
import { EventListSchema, SseEventFrameSchema, UserMessageEventSchema } from "./event-schema.ts";
import { ON_SESSION, WITH_BODY, type Param, type RouteContract } from "./route-contract.ts";

const limit: Param = {
  schema: z.string().regex(/^[0-9]+$/),
  description: "Page size, an integer from 1 to 1000 (default 100). Outside the range: `400`.",
};

export const SESSION_ROUTES: RouteContract[] = [
  {
    method: "post",
    path: "/sessions",
    operationId: "createSession",
    summary: "Create a session",
    description: "Records the session's metadata; no harness starts until the first message. Needs a tenant-wide manage token.",
    tag: "sessions",
    access: "manage",
    body: { schema: CreateSessionSchema },
    responses: { 201: { description: "The new session, `idle`.", json: SessionSchema } },
    errors: [...WITH_BODY, 401, 403, 422, 429, 500],
  },
  {
    method: "get",
    path: "/sessions",
    operationId: "listSessions",
    summary: "List sessions",
    description: "The tenant's sessions in ascending id order. A session-scoped token sees only its session.",
    tag: "sessions",
    access: "token",
    query: { after: { schema: z.string(), description: "The last session id of the previous page (either case), or empty for the first page. Anything else: `400`." }, limit },
    responses: { 200: { description: "A page of sessions.", json: SessionListSchema } },
    errors: [400, 401, 403, 500],
  },
  {
    method: "get",
    path: "/sessions/{id}",
    operationId: "getSession",
    summary: "Get a session",
    tag: "sessions",
    access: "token",
    responses: { 200: { description: "The session.", json: SessionSchema } },
    errors: ON_SESSION,
  },
  {
    method: "post",
    path: "/sessions/{id}/events",
    operationId: "sendInput",
    summary: "Send a message or an interrupt",
    description:
      "`user.message` is queued and answered with its recorded event; a repeated `key` with the same text returns the original event. `user.interrupt` is answered with `{\"status\":\"interrupt_requested\"}`. A `traceparent` header is joined by the turn.",
    tag: "sessions",
    access: "write",
    headers: { traceparent: { schema: z.string(), description: "W3C trace context the turn joins." } },
    body: { schema: InputSchema },
    responses: { 202: { description: "The recorded `user.message` event, or the interrupt's Status.", json: [UserMessageEventSchema, StatusSchema] } },
    errors: [...WITH_BODY, ...ON_SESSION, 409, 422, 429],
  },
  {
    method: "get",
    path: "/sessions/{id}/events",
    operationId: "readEvents",
    summary: "Read or stream events",
    description:
      "JSON (default): a page of retained events after `after`. With `Accept: text/event-stream`: replay of retained events after the cursor in batches of 100, then live events, with no gaps or duplicates. The stream cursor is `after` when present (even empty), else `Last-Event-ID`.",
    tag: "sessions",
    access: "token",
    query: {
      after: { schema: z.string(), description: "A cursor as received (an event's `cursor` or a page's `next_cursor`); empty starts at the beginning." },
      limit,
    },
    headers: {
      "Last-Event-ID": { schema: Cursor, description: "SSE reconnect cursor, used when `after` is absent." },
      Accept: { schema: z.string(), description: "`text/event-stream` selects the stream." },
    },
    responses: {
      200: { description: "An EventList, or an SSE stream of event frames.", json: EventListSchema, sse: SseEventFrameSchema },
    },
    errors: [400, ...ON_SESSION, 409, 429],
  },
  {
    method: "post",
    path: "/sessions/{id}/resume",
    operationId: "resumeSession",
    summary: "Resume an interrupted or failed session",
    description: "Moves the session to `idle` from its last completed checkpoint. Other statuses: `409`; a full persistence queue: `429`.",
    tag: "sessions",
    access: "manage",
    body: { schema: EmptySchema, optional: true },
    responses: { 200: { description: "The session, now `idle`.", json: SessionSchema } },
    errors: [...WITH_BODY, ...ON_SESSION, 409, 429],
  },
  {
    method: "post",
    path: "/sessions/{id}/close",
    operationId: "closeSession",
    summary: "Close a session",
    description: "Permanent; running and queued work stop, history stays readable. Closing again answers the same.",
    tag: "sessions",
    access: "manage",
    body: { schema: EmptySchema, optional: true },
    responses: { 202: { description: "`{\"status\":\"closed\"}`.", json: StatusSchema } },
    errors: [...WITH_BODY, ...ON_SESSION],
  },
];
