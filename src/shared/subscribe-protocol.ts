/**
 * Messages on the socket between the Worker's SSE relay and a SessionObject (one socket per SSE
 * client). Replay is pulled: the relay sends `more` when it has written the previous batch, so a
 * long log never piles up in memory; once the object reports `live`, retained and live-only events
 * are pushed as they happen.
 */
import type { Event } from "./api-schema.ts";

/** Spec "SSE replay batch": 100 events. */
export const REPLAY_BATCH = 100;

export const MORE = "more";

export type SubscribeDown =
  /** A replay batch; `live: true` means the object has switched this socket to live delivery. */
  | { t: "replay"; events: Event[]; live: boolean }
  /** Events pushed live: retained ones carry their cursor. */
  | { t: "live"; events: Event[] }
  /** The session is closed and everything was delivered: end the stream. */
  | { t: "end" };
