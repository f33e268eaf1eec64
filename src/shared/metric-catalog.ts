/**
 * Every metric of the service (docs/design-notes.md "Telemetry"): its kind, unit, the labels it may
 * carry and which process records it. No metric may carry a tenant or session label; recording a
 * label outside its list is a programming error and throws.
 */

export type MetricKind = "counter" | "histogram" | "gauge" | "updown";

export type MetricSpec = {
  kind: MetricKind;
  unit: string;
  description: string;
  labels: readonly string[];
  /** Where it is recorded: the Worker and its objects, or the runner-host. */
  source: "worker" | "runner-host";
};

export const METRICS = {
  "svc.http.requests": { kind: "counter", unit: "{request}", description: "HTTP requests by route template, method and status", labels: ["route", "method", "status"], source: "worker" },
  "svc.http.duration": { kind: "histogram", unit: "ms", description: "HTTP latency by route template and method; SSE streams are not timed", labels: ["route", "method"], source: "worker" },
  "svc.http.rejected": { kind: "counter", unit: "{response}", description: "Error responses by error code", labels: ["code"], source: "worker" },
  "svc.executions.active": { kind: "updown", unit: "{turn}", description: "Running turns", labels: [], source: "runner-host" },
  "svc.input.queue_delay": { kind: "histogram", unit: "ms", description: "Time a message waited before its turn began", labels: [], source: "runner-host" },
  "svc.assistant.first_output": { kind: "histogram", unit: "ms", description: "Time from message acceptance to first assistant output", labels: [], source: "runner-host" },
  "svc.runner.startup": { kind: "histogram", unit: "ms", description: "Harness process start time, by harness", labels: ["harness"], source: "runner-host" },
  "svc.tool.calls": { kind: "counter", unit: "{call}", description: "Tool calls, by tool and outcome", labels: ["tool", "outcome"], source: "runner-host" },
  "svc.tool.duration": { kind: "histogram", unit: "ms", description: "Tool call latency, by tool and outcome", labels: ["tool", "outcome"], source: "runner-host" },
  "svc.transcript.bytes": { kind: "counter", unit: "By", description: "Growth of event logs (NDJSON bytes appended)", labels: [], source: "worker" },
  "svc.native.appended_bytes": { kind: "counter", unit: "By", description: "Growth of native harness state", labels: [], source: "runner-host" },
  "svc.sync.pending": { kind: "gauge", unit: "{session}", description: "Sessions waiting for an external upload", labels: [], source: "worker" },
  "svc.sync.duration": { kind: "histogram", unit: "ms", description: "Duration of one external upload", labels: [], source: "worker" },
  "svc.sync.failures": { kind: "counter", unit: "{upload}", description: "Failed external uploads", labels: [], source: "worker" },
} as const satisfies Record<string, MetricSpec>;

export type MetricName = keyof typeof METRICS;
export type MetricsOf<K extends MetricKind> = { [N in MetricName]: (typeof METRICS)[N]["kind"] extends K ? N : never }[MetricName];
export type LabelsOf<N extends MetricName> = { [L in (typeof METRICS)[N]["labels"][number]]: string };

/** Metric export interval, ms: every 15 s (docs/configuration.md "Environment"). */
export const EXPORT_INTERVAL_MS = 15_000;
/**
 * Bound on one OTLP export, ms: a slow collector must not hold an isolate for long, and the
 * runner-host's last export fits well inside its ~20 s exit budget.
 */
export const EXPORT_TIMEOUT_MS = 5_000;

/** Bucket bounds of the millisecond histograms: a few ms up to the 5-minute default tool timeout. */
export const MS_BUCKETS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000];
