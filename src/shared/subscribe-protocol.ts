/**
 * Messages on the socket between the Worker's SSE relay and a SessionObject (one socket per SSE
 * client). Replay is pulled: the relay sends `more` when it has written the previous batch, so a
 * long log never piles up in memory; once the object reports `live`, retained and live-only events
 * are pushed as they happen. Up messages are the plain words `more` and `end`.
 */
import type { Event } from "./api-schema.ts";

/** SSE replay batch: 100 events (docs/api.md "SSE"). */
export const REPLAY_BATCH = 100;
/**
 * Byte budget of one replay batch, in NDJSON line bytes (at least one event, whatever its size): a
 * batch is one write to the client, and a client that stops reading pins the write the runtime is
 * stuck on and the next one until it reads or goes, so a batch stays small (8 MiB batches pinned
 * ~25 MiB of the Worker's memory per stalled client).
 */
export const REPLAY_BATCH_BYTES = 256 * 1024;

export const MORE = "more";
/**
 * Up: end this stream after what was already sent (the service is shutting down). The object
 * answers with `end` and closes; everything it sent before comes first on the socket.
 */
export const END = "end";

export type SubscribeDown =
  /** A replay batch; `live: true` means the object has switched this socket to live delivery. */
  | { t: "replay"; events: Event[]; live: boolean }
  /** Events pushed live: retained ones carry their cursor. */
  | { t: "live"; events: Event[] }
  /** Everything was delivered (the session is closed, or the relay asked to end): end the stream. */
  | { t: "end" };
