/** Constants shared by the Worker runtime and the Node launcher (no platform imports here). */

/** Variable the local stack binds its generated runner secret to when `runners` is absent. */
export const DEFAULT_RUNNER_SECRET_VAR = "SVC_RUNNER_SECRET";

/**
 * Where the local stack's shutdown first tells the Worker it is shutting down (runner secret): new
 * work is refused and readiness fails from then on, before the runner-host starts draining.
 */
export const DRAIN_PATH = "/internal/drain";

/** The local stack's LOCAL_DISK service binding: `{"ok": boolean}`, whether its disks have room for new work. */
export const LOCAL_DISK_ROOM_URL = "http://local-disk/room";

/** Where the local stack's shutdown ends the Worker's open event streams (runner secret). */
export const END_STREAMS_PATH = "/internal/streams/end";

/**
 * How long a shutdown waits for open event streams to take their last events, ms. A client that
 * has not read them by then is cut: the whole stop stays within "about 20 s" (docs/api.md
 * "Shutdown and readiness").
 */
export const STREAM_END_MS = 5_000;
