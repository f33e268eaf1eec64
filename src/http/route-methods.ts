/**
 * Which methods the route table serves at a path, so a request with another method is told which
 * to use (its `404` names them and carries `Allow`), and so `HEAD` never opens a stream: Hono runs
 * the GET handler for `HEAD` and drops the body, which for an event stream, an executor's command
 * stream or its RPC upgrade would take a stream slot or replace the executor's live connection.
 */
import type { MiddlewareHandler } from "hono";
import { notFound, ServiceError } from "../shared/errors.ts";
import { ROUTES } from "../shared/route-table.ts";

type PathMethods = { template: string; pattern: RegExp; methods: string[]; stream: boolean };

/** Route templates as patterns (`{id}` is one path segment), with their methods. */
const PATHS: PathMethods[] = [];
for (const r of ROUTES) {
  let p = PATHS.find((x) => x.template === r.path);
  if (!p) {
    const pattern = new RegExp(`^${r.path.split(/\{[^}]+\}/).map(escape).join("[^/]+")}$`);
    p = { template: r.path, pattern, methods: [], stream: false };
    PATHS.push(p);
  }
  p.methods.push(r.method.toUpperCase());
  if (Object.values(r.responses).some((s) => s.sse !== undefined || s.upgrade)) p.stream = true;
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function at(path: string): PathMethods | undefined {
  return PATHS.find((p) => p.pattern.test(path));
}

/** `HEAD` on a route that can answer with a stream is refused before its GET handler runs. */
export const refuseHeadOnStreams: MiddlewareHandler = async (c, next) => {
  const p = c.req.method === "HEAD" ? at(c.req.path) : undefined;
  if (p?.stream) throw new ServiceError("not_found", `HEAD is not a method of ${p.template}: its GET opens a stream; use GET`, 404, { Allow: "GET" });
  await next();
};

/** The `404` of a request no route takes: which methods its path has, when it has any. */
export function noSuchRoute(method: string, path: string): ServiceError {
  const p = at(path);
  if (!p) return notFound("no such route");
  const takes = [...p.methods].sort();
  const allow = p.stream || !takes.includes("GET") ? takes : [...takes, "HEAD"].sort();
  return new ServiceError("not_found", `${method} is not a method of ${p.template}; it takes ${allow.join(", ")}`, 404, { Allow: allow.join(", ") });
}
