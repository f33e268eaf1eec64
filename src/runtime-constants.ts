/** Constants shared by the Worker runtime and the Node launcher (no platform imports here). */

/** Variable the local stack binds its generated runner secret to when `runners` is absent. */
export const DEFAULT_RUNNER_SECRET_VAR = "SVC_RUNNER_SECRET";
