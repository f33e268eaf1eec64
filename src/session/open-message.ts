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

/**
 * UTF-8 bytes of a `native` message as sent (its records, the commas between them and its
 * envelope): far under the 32 MiB WebSocket message cap. A record larger than this goes alone.
 */
const NATIVE_PART_BYTES = 8 * 1024 * 1024;
/** Room for a `native` message's envelope (`{"t":"native","seq":…,"records":[]}`), bytes. */
const NATIVE_ENVELOPE_BYTES = 64;
/** Records' sizes read per query while splitting native state. */
const NATIVE_READ = 1000;

type Unnumbered<T> = T extends { seq: number } ? Omit<T, "seq"> : never;
/**
 * A `native` message as the link stores it: the native records it carries (`seq` after `after`,
 * up to `last`, `count` of them), read from the `native` table when it is sent. Stored whole, a
 * session's native state was copied into the link's rows at every open, and a part past the
 * platform's row cap (2 MB; ~8 MB locally) could not be stored: the open failed silently.
 */
export type NativeRange = { t: "native"; range: { after: number; last: number; count: number } };
export type OpenMessage = Unnumbered<Extract<LinkDown, { t: "open" }>> | NativeRange;

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

  const parts: NativeRange["range"][] = [];
  let part: NativeRange["range"] | undefined;
  let bytes = 0;
  let prev = 0;
  for (;;) {
    const batch = turns.nativeSizes(prev, NATIVE_READ);
    if (batch.length === 0) break;
    for (const r of batch) {
      const size = r.bytes + 1; // its comma
      if (part && bytes + size > NATIVE_PART_BYTES) {
        parts.push(part);
        part = undefined;
      }
      if (!part) {
        part = { after: prev, last: r.seq, count: 0 };
        bytes = NATIVE_ENVELOPE_BYTES;
      }
      part.last = r.seq;
      part.count++;
      bytes += size;
      prev = r.seq;
    }
  }
  if (part) parts.push(part);

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
  return [open, ...parts.map((range) => ({ t: "native" as const, range }))];
}
