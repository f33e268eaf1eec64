/**
 * `GET /internal/metrics` (runner-secret): the Worker's and its objects' metric deltas since the
 * last read, which a runner-host with OTLP export adds to its own meters (the Worker has no
 * exporter of its own). Shared by the Worker (producer) and the runner-host (consumer).
 */
import { z } from "zod";

/** At most this many duration samples travel per read; beyond it the oldest are dropped. */
export const MAX_DURATION_SAMPLES = 10_000;

export const WorkerMetricsSchema = z.strictObject({
  /** `svc.sync.pending`: sessions waiting to upload now. */
  sync_pending: z.int().min(0),
  /** `svc.sync.duration`: one upload round each, ms. */
  sync_duration_ms: z.array(z.number().min(0)).max(MAX_DURATION_SAMPLES),
  /** `svc.sync.failures`: failed upload rounds. */
  sync_failures: z.int().min(0),
  /** `svc.transcript.bytes`: growth of event logs (NDJSON bytes of retained events). */
  transcript_bytes: z.int().min(0),
});
export type WorkerMetrics = z.infer<typeof WorkerMetricsSchema>;
