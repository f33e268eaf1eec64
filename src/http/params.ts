/** Path and query parameters shared by the routes. */
import type { Context } from "hono";
import { invalid, notFound } from "../shared/errors.ts";
import { isId } from "../shared/ids.ts";

/** Page `limit`: 1 to 1000, default 100 (docs/api.md "Limits"). */
export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 1000;

/** A path `id` (32 hex, either case); anything else names no resource. Returned lowercase. */
export function pathId(raw: string, what = "session"): string {
  if (!isId(raw)) throw notFound(`${what} not found`);
  return raw.toLowerCase();
}

export function pageLimit(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_PAGE;
  if (!/^[0-9]+$/.test(raw)) throw invalid("limit: must be an integer from 1 to 1000");
  const n = Number(raw);
  if (n < 1 || n > MAX_PAGE) throw invalid("limit: must be an integer from 1 to 1000");
  return n;
}

/**
 * A query parameter a route reads, or undefined when absent. Given twice it is `400`: which one
 * would count is not something a client should have to guess (`limit=1&limit=2000`).
 */
export function queryParam(c: Context, name: string): string | undefined {
  const all = c.req.queries(name);
  if (all && all.length > 1) throw invalid(`${name}: given more than once`);
  return all?.[0];
}
