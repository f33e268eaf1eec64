/**
 * The Worker-side metrics registry and its OTLP encoding: labels are checked against the catalog
 * (no tenant or session label can be recorded), windows are deltas, histograms bucket in ms.
 */
import { describe, expect, it } from "vitest";
import { exportRequest } from "../../src/metrics/otlp.ts";
import { metrics, registry } from "../../src/metrics/registry.ts";

describe("metrics registry", () => {
  it("refuses a label the catalog does not list, such as tenant or session", () => {
    expect(() => metrics.counter("svc.http.rejected").add(1, { code: "x", tenant: "acme" } as never)).toThrow(/no label tenant/);
    expect(() => metrics.counter("svc.transcript.bytes").add(1, { session: "s" } as never)).toThrow(/no label session/);
    registry.take();
  });

  it("exports deltas: each window holds what was recorded since the previous one", () => {
    registry.take();
    metrics.counter("svc.http.requests").add(1, { route: "/sessions", method: "GET", status: "200" });
    metrics.counter("svc.http.requests").add(2, { route: "/sessions", method: "GET", status: "200" });
    metrics.histogram("svc.http.duration").record(7, { route: "/sessions", method: "GET" });
    metrics.histogram("svc.http.duration").record(400_000, { route: "/sessions", method: "GET" });
    const body = exportRequest(registry.take(), "i1") as any;
    const rm = body.resourceMetrics[0];
    expect(rm.resource.attributes).toContainEqual({ key: "service.name", value: { stringValue: "svc" } });
    const byName = Object.fromEntries(rm.scopeMetrics[0].metrics.map((m: any) => [m.name, m]));
    expect(byName["svc.http.requests"].sum).toMatchObject({ aggregationTemporality: 1, isMonotonic: true, dataPoints: [{ asDouble: 3 }] });
    const h = byName["svc.http.duration"].histogram.dataPoints[0];
    expect(h).toMatchObject({ count: "2", sum: 400_007, min: 7, max: 400_000 });
    expect(h.bucketCounts[3]).toBe("1"); // 7 ms falls in (5, 10], the fourth bucket
    expect(h.bucketCounts.at(-1)).toBe("1"); // past the last bound
    expect(registry.take().metrics.size).toBe(0);
  });

  it("adds up one point per label set, whatever order its labels were written in", () => {
    registry.take();
    metrics.counter("svc.http.requests").add(1, { route: "/sessions", method: "GET", status: "200" });
    metrics.counter("svc.http.requests").add(2, { status: "200", method: "GET", route: "/sessions" } as never);
    metrics.counter("svc.http.requests").add(4, { route: "/sessions", method: "POST", status: "200" });
    const points = registry.take().metrics.get("svc.http.requests")!;
    expect(points.map((p) => [p.labels.method, p.kind === "sum" && p.value])).toEqual([
      ["GET", 3],
      ["POST", 4],
    ]);
  });

  it("without an export endpoint, drops what was recorded (nothing is kept)", async () => {
    const { scheduleExport } = await import("../../src/metrics/exporter.ts");
    metrics.counter("svc.transcript.bytes").add(10);
    expect(registry.empty).toBe(false);
    scheduleExport({}, () => {});
    expect(registry.empty).toBe(true);
  });
});
