/**
 * In-isolate metric aggregation for the Worker and its objects.
 *
 * Lifecycle: one registry per isolate (module state), shared by every request and object the
 * isolate runs. Values aggregate in memory per (metric, label set) since the last export; an export
 * takes them all and starts a new window (delta temporality: isolates come and go, so each one
 * reports what happened since its previous report and the collector adds them up). Nothing is
 * stored; an isolate evicted before its export loses at most one window.
 */
import { METRICS, MS_BUCKETS, type LabelsOf, type MetricName, type MetricsOf } from "../shared/metric-catalog.ts";

export type Point =
  | { kind: "sum"; labels: Record<string, string>; value: number }
  | { kind: "gauge"; labels: Record<string, string>; value: number }
  | { kind: "histogram"; labels: Record<string, string>; count: number; sum: number; min: number; max: number; buckets: number[] };

export type Window = { start: number; end: number; metrics: Map<MetricName, Point[]> };

class Registry {
  /** Start of the current window: the first record after an export (0 until then). */
  #start = 0;
  #points = new Map<MetricName, Map<string, Point>>();
  get empty(): boolean {
    return this.#points.size === 0;
  }

  #point(name: MetricName, labels: Record<string, string>, make: () => Point): Point {
    const allowed: readonly string[] = METRICS[name].labels;
    for (const k in labels) if (!allowed.includes(k)) throw new Error(`metric ${name} has no label ${k}`);
    // The values in the catalog's label order: one key per label set, whatever order it was written in.
    const key = allowed.length === 0 ? "" : JSON.stringify(allowed.map((k) => labels[k] ?? null));
    if (this.#points.size === 0) this.#start = Date.now();
    let byLabels = this.#points.get(name);
    if (!byLabels) this.#points.set(name, (byLabels = new Map()));
    let p = byLabels.get(key);
    if (!p) byLabels.set(key, (p = make()));
    return p;
  }

  add(name: MetricName, v: number, labels: Record<string, string>): void {
    const p = this.#point(name, labels, () => ({ kind: "sum", labels, value: 0 }));
    if (p.kind === "sum") p.value += v;
  }

  set(name: MetricName, v: number, labels: Record<string, string>): void {
    const p = this.#point(name, labels, () => ({ kind: "gauge", labels, value: 0 }));
    if (p.kind === "gauge") p.value = v;
  }

  record(name: MetricName, v: number, labels: Record<string, string>): void {
    const p = this.#point(name, labels, () => ({ kind: "histogram", labels, count: 0, sum: 0, min: v, max: v, buckets: new Array<number>(MS_BUCKETS.length + 1).fill(0) }));
    if (p.kind !== "histogram") return;
    p.count += 1;
    p.sum += v;
    p.min = Math.min(p.min, v);
    p.max = Math.max(p.max, v);
    let i = MS_BUCKETS.findIndex((b) => v <= b);
    if (i < 0) i = MS_BUCKETS.length;
    p.buckets[i]! += 1;
  }

  /** Drops everything since the previous take (nowhere to send it); the next record opens a new window. */
  clear(): void {
    if (this.#points.size > 0) this.#points = new Map();
  }

  /** Everything since the previous take, and a new window from now. */
  take(): Window {
    const end = Date.now();
    const metrics = new Map([...this.#points].map(([name, m]): [MetricName, Point[]] => [name, [...m.values()]]));
    const w = { start: this.#start, end, metrics };
    this.#points = new Map();
    this.#start = end;
    return w;
  }
}

export const registry = new Registry();

/**
 * The metrics API for the Worker and its objects:
 * `metrics.counter("svc.sync.failures").add(1)`, `metrics.histogram("svc.sync.duration").record(ms)`,
 * `metrics.gauge("svc.sync.pending").set(n)`. Names and labels are checked against the catalog.
 */
export const metrics = {
  counter<N extends MetricsOf<"counter">>(name: N) {
    return { add: (v: number, labels = {} as LabelsOf<N>) => registry.add(name, v, labels) };
  },
  histogram<N extends MetricsOf<"histogram">>(name: N) {
    return { record: (v: number, labels = {} as LabelsOf<N>) => registry.record(name, Math.max(0, v), labels) };
  },
  gauge<N extends MetricsOf<"gauge">>(name: N) {
    return { set: (v: number, labels = {} as LabelsOf<N>) => registry.set(name, v, labels) };
  },
};
