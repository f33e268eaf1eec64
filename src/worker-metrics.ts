/**
 * Metric counters of the Worker's objects, kept per isolate and added to the deployment's totals
 * (held by SyncBacklog) at most every FLUSH_MS, so counting costs no call per event. A runner-host
 * with OTLP export reads and resets the totals (`GET /internal/metrics`). Metrics carry no tenant
 * or session label.
 */
import type { Env } from "./env.ts";
import { BACKLOG_NAME } from "./persistence/backlog-object.ts";
import { MAX_DURATION_SAMPLES } from "./shared/metrics-protocol.ts";

/** Longest time counts wait in an isolate before joining the totals, ms (the export interval). */
const FLUSH_MS = 15_000;

export type MetricDelta = { transcript_bytes: number; sync_duration_ms: number[]; sync_failures: number };

let delta: MetricDelta = { transcript_bytes: 0, sync_duration_ms: [], sync_failures: 0 };
let lastFlush = 0;

export function countTranscript(bytes: number): void {
  delta.transcript_bytes += bytes;
}

export function countSyncRound(ms: number, failed: boolean): void {
  if (delta.sync_duration_ms.length < MAX_DURATION_SAMPLES) delta.sync_duration_ms.push(ms);
  if (failed) delta.sync_failures++;
}

/** This isolate's counts, reset to zero; give them back with `untake` if they could not be sent. */
export function takeMetrics(): MetricDelta {
  const d = delta;
  delta = { transcript_bytes: 0, sync_duration_ms: [], sync_failures: 0 };
  return d;
}

export function untake(d: MetricDelta): void {
  delta.transcript_bytes += d.transcript_bytes;
  delta.sync_failures += d.sync_failures;
  delta.sync_duration_ms = [...d.sync_duration_ms, ...delta.sync_duration_ms].slice(0, MAX_DURATION_SAMPLES);
}

/**
 * Adds this isolate's counts to the totals when FLUSH_MS have passed. (A session leaving the sync
 * backlog carries them along too, at no extra call.)
 */
export async function flushMetrics(env: Env): Promise<void> {
  const now = Date.now();
  if (now - lastFlush < FLUSH_MS) return;
  if (delta.transcript_bytes === 0 && delta.sync_duration_ms.length === 0 && delta.sync_failures === 0) return;
  lastFlush = now;
  const sent = takeMetrics();
  try {
    await env.SYNC_BACKLOG.getByName(BACKLOG_NAME).addMetrics(sent);
  } catch {
    untake(sent);
  }
}
