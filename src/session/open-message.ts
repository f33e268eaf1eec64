/**
 * What a runner-host needs to open a session: its config, the provider key (keys travel only over
 * the runner link and stdio), and its native state split into parts that fit a socket message.
 */
import type { ProviderGrant, LinkDown } from "../shared/runner-protocol.ts";
import type { SessionConfig, Tool } from "../shared/api-schema.ts";
import type { Runtime } from "../runtime.ts";
import type { SessionRow } from "./record.ts";
import type { Turns } from "./turns.ts";
import { toolRoutes } from "./runtime-calls.ts";

/** UTF-8 bytes of native records per `native` message: far under the 32 MiB WebSocket message cap. */
const NATIVE_PART_BYTES = 8 * 1024 * 1024;
const utf8 = new TextEncoder();
/** Records read per query while splitting native state. */
const NATIVE_READ = 200;

type Unnumbered<T> = T extends { seq: number } ? Omit<T, "seq"> : never;
export type OpenMessage = Unnumbered<Extract<LinkDown, { t: "open" } | { t: "native" }>>;

/** The provider prefix of a `provider/model` id (create refuses one without a `/`). */
const providerOf = (model: string) => model.slice(0, model.indexOf("/"));

export function providerGrant(rt: Runtime, model: string): ProviderGrant | undefined {
  const prefix = providerOf(model);
  const p = Object.hasOwn(rt.config.providers, prefix) ? rt.config.providers[prefix] : undefined;
  const key = p ? rt.vars[p.api_key_env] : undefined;
  if (!p || !key) return undefined;
  const grant: ProviderGrant = { prefix, key };
  if (p.base_url) grant.base_url = p.base_url;
  if (p.api) grant.api = p.api;
  return grant;
}

/**
 * The provider grant a turn of this session runs with, or why the session cannot run under the
 * deployment's configuration now: its harness or its model's provider was removed from the
 * configuration, or the provider's key variable is unset, since the session was created. A
 * message to it is refused, and input it already holds fails, rather than waiting for a
 * runner-host that will never take it.
 */
export function runGrant(rt: Runtime, row: Pick<SessionRow, "harness" | "config">): ProviderGrant | string {
  if (!Object.hasOwn(rt.config.harnesses, row.harness)) return `harness "${row.harness}" is no longer configured`;
  const model: string = JSON.parse(row.config).model;
  const grant = providerGrant(rt, model);
  if (grant) return grant;
  const prefix = providerOf(model);
  if (!Object.hasOwn(rt.config.providers, prefix)) return `provider "${prefix}" of model "${model}" is no longer configured`;
  return `the key of provider "${prefix}" is not available`;
}

/** Why the session cannot run under the configuration now (`runGrant`), or undefined. */
export function cannotRun(rt: Runtime, row: Pick<SessionRow, "harness" | "config">): string | undefined {
  const g = runGrant(rt, row);
  return typeof g === "string" ? g : undefined;
}

export function openMessages(rt: Runtime, row: SessionRow, turns: Turns): OpenMessage[] | { error: string } {
  const config = JSON.parse(row.config) as SessionConfig;
  const provider = runGrant(rt, row);
  if (typeof provider === "string") return { error: provider };

  const parts: unknown[][] = [];
  let part: unknown[] = [];
  let bytes = 0;
  for (let after = 0; ; ) {
    const batch = turns.nativeRecords(after, NATIVE_READ);
    if (batch.length === 0) break;
    for (const r of batch) {
      const size = utf8.encode(JSON.stringify(r.record)).length;
      if (part.length > 0 && bytes + size > NATIVE_PART_BYTES) {
        parts.push(part);
        part = [];
        bytes = 0;
      }
      part.push(r.record);
      bytes += size;
    }
    after = batch.at(-1)!.seq;
  }
  if (part.length > 0) parts.push(part);

  const open: OpenMessage = {
    t: "open",
    session_id: row.id,
    tenant: row.tenant,
    harness: row.harness,
    model: config.model,
    tools: JSON.parse(row.descriptors) as Tool[],
    provider,
    native_parts: parts.length,
  };
  const routes = toolRoutes(row);
  if (routes.length > 0) open.routes = routes;
  if (config.instructions !== undefined) open.instructions = config.instructions;
  if (config.reasoning_effort) open.reasoning_effort = config.reasoning_effort;
  return [open, ...parts.map((records) => ({ t: "native" as const, records }))];
}
