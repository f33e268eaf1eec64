/**
 * One window of metrics as an OTLP/HTTP JSON export request (opentelemetry-proto
 * `ExportMetricsServiceRequest`, JSON encoding: 64-bit integers as strings). Sums and histograms
 * use delta temporality; each isolate is its own `service.instance.id` under `service.name=svc`.
 */
import { METRICS, MS_BUCKETS, type MetricName } from "../shared/metric-catalog.ts";
import type { Point, Window } from "./registry.ts";

/** OTLP `AggregationTemporality.DELTA`. */
const DELTA = 1;

const nanos = (ms: number) => `${BigInt(Math.round(ms)) * 1_000_000n}`;
const attributes = (labels: Record<string, string>) => Object.entries(labels).map(([key, v]) => ({ key, value: { stringValue: v } }));

function metric(name: MetricName, points: Point[], w: Window): Record<string, unknown> {
  const spec = METRICS[name];
  const times = { startTimeUnixNano: nanos(w.start), timeUnixNano: nanos(w.end) };
  const out: Record<string, unknown> = { name, unit: spec.unit, description: spec.description };
  if (spec.kind === "histogram") {
    out.histogram = {
      aggregationTemporality: DELTA,
      dataPoints: points.flatMap((p) =>
        p.kind === "histogram"
          ? [{ attributes: attributes(p.labels), ...times, count: String(p.count), sum: p.sum, min: p.min, max: p.max, bucketCounts: p.buckets.map(String), explicitBounds: MS_BUCKETS }]
          : [],
      ),
    };
  } else if (spec.kind === "gauge") {
    out.gauge = { dataPoints: points.map((p) => ({ attributes: attributes(p.labels), timeUnixNano: times.timeUnixNano, asDouble: p.kind === "gauge" ? p.value : 0 })) };
  } else {
    out.sum = {
      aggregationTemporality: DELTA,
      isMonotonic: spec.kind === "counter",
      dataPoints: points.map((p) => ({ attributes: attributes(p.labels), ...times, asDouble: p.kind === "sum" ? p.value : 0 })),
    };
  }
  return out;
}

export function exportRequest(w: Window, instanceId: string): Record<string, unknown> {
  return {
    resourceMetrics: [
      {
        resource: { attributes: attributes({ "service.name": "svc", "service.instance.id": instanceId }) },
        scopeMetrics: [{ scope: { name: "svc" }, metrics: [...w.metrics].map(([name, points]) => metric(name, points, w)) }],
      },
    ],
  };
}
