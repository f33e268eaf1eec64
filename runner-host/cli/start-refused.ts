/**
 * A start that svc refuses in its own words (a data_dir another process holds, a listen address in
 * use): the message says everything, so `svc` logs it without a stack trace.
 */
export class StartRefused extends Error {}
