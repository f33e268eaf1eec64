/**
 * The named schemas of the published contract. A schema registered here becomes
 * `#/components/schemas/<id>` in the OpenAPI document and is referenced, never copied, wherever a
 * route or another schema uses it. Registration happens when a schema module is imported, so the
 * document holds exactly the schemas the route table reaches.
 */
import * as z from "zod";
import { ID_ANY_CASE_PATTERN } from "./ids.ts";

export type ComponentMeta = { id: string; description: string };

export const contractRegistry = z.registry<ComponentMeta>();
/** The same components by id, in registration order. */
export const componentsById = new Map<string, { schema: z.ZodType; description: string }>();

/** Registers `schema` as the component `id` and returns it unchanged. Ids are unique. */
export function component<S extends z.ZodType>(id: string, schema: S, description: string): S {
  if (componentsById.has(id)) throw new Error(`component ${id} is declared twice`);
  contractRegistry.add(schema, { id, description });
  componentsById.set(id, { schema, description });
  return schema;
}

/** Session, executor and event ids are 32 hex characters; the service emits lowercase (docs/api.md "Events"). */
export const Hex32 = z.string().regex(ID_ANY_CASE_PATTERN);
/** Timestamps are RFC 3339 `date-time` strings in UTC (docs/api.md "Events"). */
export const DateTime = z.iso.datetime();
/** Opaque position in an event log; at most 512 bytes (docs/api.md "Cursors"). */
export const Cursor = z.string().min(1).max(512);
