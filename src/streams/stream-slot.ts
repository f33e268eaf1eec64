/**
 * One `limits.subscribers` slot for a new SSE stream, whatever it carries: a session's events or an
 * executor's commands (every SSE connection the service serves counts; docs/api.md "SSE"). Taken
 * before the stream opens (`429` when the deployment or the tenant's share is full, or while shutting down),
 * given back once when it ends; the isolate's holding is renewed while streams are open.
 */
import type { AppContext } from "../http/context.ts";
import { isShuttingDown } from "../http/draining.ts";
import { log } from "../log.ts";
import { overloaded } from "../shared/errors.ts";
import { openStreams, type EndableStream } from "./open-streams.ts";
import { isolateSlots } from "./stream-slots.ts";

export type SlotHooks = { tick: () => void; end: () => void; track: (stream: EndableStream) => void };

export async function takeStreamSlot(c: AppContext, tenant: string): Promise<SlotHooks> {
  // Streams opened after a shutdown ended the others would be cut when the runtime stops.
  if (openStreams.closing || isShuttingDown()) throw overloaded("the service is shutting down");
  // limits.subscribers counts streams across the deployment; this isolate holds slots in blocks.
  const slots = isolateSlots(c.env);
  if (!(await slots.acquire(tenant))) throw overloaded("too many SSE streams are open: limits.subscribers across the deployment, or this tenant's share of it when several tenants are configured");
  let ended = false;
  return {
    tick: () => background(c, slots.tick()),
    end: () => {
      if (ended) return;
      ended = true;
      background(c, slots.release(tenant));
    },
    track: (stream) => openStreams.add(stream),
  };
}

/** Work that must finish after the response (slot bookkeeping); failures are logged, never thrown. */
function background(c: AppContext, p: Promise<void> | undefined): void {
  if (!p) return;
  const logged = p.catch((e) => log("error", "stream slot sync failed", { error: String(e) }));
  try {
    c.executionCtx.waitUntil(logged);
  } catch {
    // No execution context (the app called directly): the promise still runs.
  }
}
