/** Contract of `/executors` (docs/api.md "Executors"): registration, command stream, replies, RPC, close. */
import { EmptySchema, StatusSchema } from "./api-schema.ts";
import { ExecutorCredentialSchema, ExecutorRegistrationSchema, ReplySchema, SseCommandFrameSchema } from "./executor-protocol.ts";
import { WITH_BODY, type RouteContract } from "./route-contract.ts";
import * as z from "zod";

export const EXECUTOR_ROUTES: RouteContract[] = [
  {
    method: "post",
    path: "/executors",
    operationId: "registerExecutor",
    summary: "Register an executor",
    description: "Needs a manage token. Connect the executor before creating the session that binds it.",
    tag: "executors",
    access: "manage",
    body: { schema: ExecutorRegistrationSchema },
    responses: { 201: { description: "The executor id and its credential.", json: ExecutorCredentialSchema } },
    errors: [...WITH_BODY, 401, 403, 404, 409, 429, 500],
  },
  {
    method: "get",
    path: "/executors/{id}/commands",
    operationId: "executorCommands",
    summary: "Receive commands over SSE",
    description: "The first frame is `ready` with the `connection` replies must name. Commands are not replayed after a drop. The stream takes one of `limits.subscribers` (`429` past it, after the token check).",
    tag: "executors",
    access: "executor",
    responses: { 200: { description: "An SSE stream of command frames.", sse: SseCommandFrameSchema } },
    errors: [401, 404, 409, 429, 500],
  },
  {
    method: "post",
    path: "/executors/{id}/responses",
    operationId: "executorReply",
    summary: "Reply to a call",
    tag: "executors",
    access: "executor",
    body: { schema: ReplySchema },
    responses: { 200: { description: "`{\"status\":\"accepted\"}`.", json: StatusSchema } },
    errors: [...WITH_BODY, 401, 404, 409, 500],
  },
  {
    method: "get",
    path: "/executors/{id}/rpc",
    operationId: "executorRpc",
    summary: "Commands and replies over a WebSocket",
    description:
      "WebSocket upgrade with subprotocols `svc-rpc` and `svc-auth.<EXECUTOR_TOKEN>`; the server answers with `svc-rpc`. One JSON text message per Command (server to client) or Reply (client to server). Requests with an `Origin` header are refused.",
    tag: "executors",
    access: "executor",
    headers: {
      "Sec-WebSocket-Protocol": { schema: z.string(), description: "`svc-rpc, svc-auth.<EXECUTOR_TOKEN>`.", required: true },
    },
    responses: { 101: { description: "Switching to the WebSocket.", upgrade: true } },
    errors: [400, 401, 403, 404, 409, 429, 500],
  },
  {
    method: "post",
    path: "/executors/{id}/close",
    operationId: "closeExecutor",
    summary: "Close an executor",
    description: "Pending dispatched calls get unknown outcomes; future calls are unavailable.",
    tag: "executors",
    access: "executor",
    body: { schema: EmptySchema, optional: true },
    responses: { 200: { description: "`{\"status\":\"closed\"}`.", json: StatusSchema } },
    errors: [...WITH_BODY, 401, 404, 500],
  },
];
