/**
 * Runner-host OpenTelemetry (docs/design-notes.md "Telemetry") against a real OTLP/HTTP receiver
 * (@elastic/mockotlpserver, in process on 127.0.0.1:0): a turn with a host tool call through the
 * runner-host rig, then the spans, the forwarded `traceparent` and the metrics as received.
 * The endpoint reaches the runner-host through its `env` option only; process.env is untouched.
 */
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FLUSH_TIMEOUT_MS, telemetry } from "../../runner-host/telemetry.ts";
import { opened, ORPHAN, Rig, SLOW, TOOL_TOKEN, turnEnd } from "./runner-setup.ts";

type Attrs = Record<string, unknown>;
type Span = { traceId: string; spanId: string; parentSpanId?: string; name: string; attributes: Attrs };
type Point = { attributes: Attrs; asInt?: number | string; asDouble?: number; count?: number | string; min?: number; max?: number };
type Metric = { name: string; sum?: { dataPoints: Point[] }; histogram?: { dataPoints: Point[] } };
type Traces = { resourceSpans: { resource: { attributes: Attrs }; scopeSpans: { spans: Span[] }[] }[] };
type Metrics = { resourceMetrics: { resource: { attributes: Attrs }; scopeMetrics: { metrics: Metric[] }[] }[] };
/** The part of @elastic/mockotlpserver used here (it ships no types). */
type MockOtlp = {
  MockOtlpServer: new (o: object) => { httpUrl: URL; start(): Promise<void>; close(): Promise<void> };
  normalizeTrace(raw: unknown): Traces;
  normalizeMetrics(raw: unknown): Metrics;
};
const { MockOtlpServer, normalizeTrace, normalizeMetrics } = createRequire(import.meta.url)("@elastic/mockotlpserver") as MockOtlp;

const TRACE_ID = "0af7651916cd43dd8448eb211c80319c";
const PARENT_ID = "b7ad6b7169203331";
const TRACEPARENT = `00-${TRACE_ID}-${PARENT_ID}-01`;

const received = { requests: 0, traces: [] as Traces[], metrics: [] as Metrics[] };
let receiver: InstanceType<MockOtlp["MockOtlpServer"]>;
let endpoint = "";
let rig: Rig | undefined;

beforeAll(async () => {
  receiver = new MockOtlpServer({
    logLevel: "warn",
    services: ["http"],
    httpHostname: "127.0.0.1",
    httpPort: 0,
    onRequest: () => received.requests++,
    onTrace: (t: unknown) => received.traces.push(normalizeTrace(t)),
    onMetrics: (m: unknown) => received.metrics.push(normalizeMetrics(m)),
  });
  await receiver.start();
  endpoint = receiver.httpUrl.href;
});
afterAll(() => receiver.close());
beforeEach(() => {
  received.requests = 0;
  received.traces.length = 0;
  received.metrics.length = 0;
});
afterEach(async () => {
  await rig?.stop();
  rig = undefined;
});

function spans(): (Span & { resource: Attrs })[] {
  return received.traces.flatMap((t) => t.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans.map((s) => ({ ...s, resource: rs.resource.attributes })))));
}

/** Every received export of metrics, flattened, with its resource. */
function metricExports(): { resource: Attrs; metric: Metric }[] {
  return received.metrics.flatMap((m) => m.resourceMetrics.flatMap((rm) => rm.scopeMetrics.flatMap((sm) => sm.metrics.map((metric) => ({ resource: rm.resource.attributes, metric })))));
}

/** Data points of the newest export of `name` (cumulative, so it holds everything so far). */
function points(name: string): Point[] {
  const m = metricExports().findLast((e) => e.metric.name === name)?.metric;
  if (!m) throw new Error(`metric ${name} not received; got ${[...new Set(metricExports().map((e) => e.metric.name))].join(", ")}`);
  return (m.sum ?? m.histogram)!.dataPoints;
}
const value = (p: Point) => Number(p.asInt ?? p.asDouble);

describe("runner-host telemetry", () => {
  it("exports session.execute and tool.call joined to the run's traceparent, forwards the tool span to the tool, and metrics without tenant or session labels", async () => {
    rig = await Rig.start({ host: { env: { TOOL_TOKEN, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint } } });
    expect(telemetry().enabled).toBe(true);
    const sessionId = "cd".repeat(16);
    const fake = await rig.open("sess-otel", { session_id: sessionId });
    await opened(fake);

    // The message waited 250 ms in the object before its turn: queue delay counts from accepted_at.
    const turn = rig.run(fake, `[[tool get_weather {"city":"Paris"}]]`, { traceparent: TRACEPARENT, accepted_at: Date.now() - 250 });
    expect((await turnEnd(fake, turn)).status).toBe("completed");

    // A second turn held inside its tool call: one running turn, then none.
    const held = rig.run(fake, `[[tool ${SLOW.name} {}]]`);
    const slow = await rig.tools.calls.next((c) => c.path === "/slow");
    await telemetry().flush();
    expect(points("svc.executions.active").map(value)).toEqual([1]);
    slow.res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ content: [{ type: "text", text: "done" }] }));
    expect((await turnEnd(fake, held)).status).toBe("completed");
    await telemetry().flush();
    expect(points("svc.executions.active").map(value)).toEqual([0]);

    // Spans: session.execute is a child of the run's traceparent; tool.call a child of session.execute.
    const all = spans();
    const exec = all.find((s) => s.name === "session.execute" && s.traceId === TRACE_ID)!;
    expect(exec).toBeDefined();
    expect(exec.parentSpanId).toBe(PARENT_ID);
    expect(exec.attributes).toMatchObject({ "session.id": sessionId, "harness.name": "ref", "turn.status": "completed" });
    expect(exec.resource["service.name"]).toBe("svc");
    const call = all.find((s) => s.name === "tool.call" && s.traceId === TRACE_ID)!;
    expect(call).toBeDefined();
    expect(call.parentSpanId).toBe(exec.spanId);
    expect(call.attributes).toMatchObject({ "tool.name": "get_weather", "tool.outcome": "success" });
    // One session.execute per turn: the held turn has its own trace (no traceparent on its run).
    expect(all.filter((s) => s.name === "session.execute")).toHaveLength(2);

    // The tool received the tool.call span's context, not the run's.
    const hit = rig.tools.calls.items.find((c) => c.path === "/weather")!;
    expect(hit.headers.traceparent).toBe(`00-${TRACE_ID}-${call.spanId}-01`);

    // Metrics, under service.name=svc, with no tenant or session anywhere in their attributes.
    const exported = metricExports();
    expect(exported.every((e) => e.resource["service.name"] === "svc")).toBe(true);
    const calls = points("svc.tool.calls");
    expect(calls.find((p) => p.attributes.tool === "get_weather")).toMatchObject({ attributes: { tool: "get_weather", outcome: "success" } });
    expect(value(calls.find((p) => p.attributes.tool === "get_weather")!)).toBe(1);
    expect(points("svc.tool.duration").map((p) => p.attributes)).toEqual(
      expect.arrayContaining([{ tool: "get_weather", outcome: "success" }, { tool: SLOW.name, outcome: "success" }]),
    );
    const [delay] = points("svc.input.queue_delay");
    expect(Number(delay!.count)).toBe(2);
    expect(delay!.max).toBeGreaterThanOrEqual(250);
    expect(delay!.min).toBeLessThan(250); // the held turn started at once
    expect(points("svc.input.queue_delay")[0]!.attributes).toEqual({});
    expect(Math.max(...points("svc.assistant.first_output").map((p) => Number(p.count)))).toBe(2);
    expect(points("svc.runner.startup").map((p) => p.attributes)).toEqual([{ harness: "ref" }]);
    expect(value(points("svc.native.appended_bytes")[0]!)).toBeGreaterThan(0);
    const labels = JSON.stringify(exported.map((e) => [e.resource, ((e.metric.sum ?? e.metric.histogram)?.dataPoints ?? []).map((p) => p.attributes)]));
    for (const secret of [sessionId, "sess-otel", "acme"]) expect(labels).not.toContain(secret);
    expect(labels).not.toMatch(/tenant|session/i);

    // Stop exports what is left and does not throw; telemetry is off again.
    await rig.stop();
    rig = undefined;
    expect(telemetry().enabled).toBe(false);
  });

  it("every tool call has a tool.call span and counts as a tool_error, also those refused before dispatch", async () => {
    rig = await Rig.start({ host: { env: { TOOL_TOKEN, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint } } });
    const fake = await rig.open("sess-refused", { session_id: "ef".repeat(16) });
    await opened(fake);
    // Arguments the input schema rejects, a tool enabled with no host tool behind it, and a name
    // the session does not have (the harness answers that one itself).
    const turn = rig.run(fake, `[[tool get_weather {"city":7}]] [[tool ${ORPHAN.name} {}]] [[tool no_such_tool {}]]`, { traceparent: TRACEPARENT });
    expect((await turnEnd(fake, turn)).status).toBe("completed");
    await telemetry().flush();

    const names = ["get_weather", ORPHAN.name, "no_such_tool"].sort();
    const toolSpans = spans().filter((s) => s.name === "tool.call" && s.traceId === TRACE_ID);
    expect(toolSpans.map((s) => s.attributes["tool.name"]).sort()).toEqual(names);
    expect(toolSpans.every((s) => s.attributes["tool.outcome"] === "tool_error")).toBe(true);
    const exec = spans().find((s) => s.name === "session.execute" && s.traceId === TRACE_ID)!;
    expect(toolSpans.every((s) => s.parentSpanId === exec.spanId)).toBe(true);
    // The metrics' `tool` label is a host tool's configured name or a fixed word: a name the model
    // made up (answered by the harness) or one no host tool serves never becomes a label value.
    const calls = points("svc.tool.calls");
    const labels = ["get_weather", "harness", "unknown"];
    expect(calls.map((p) => p.attributes).sort((a, b) => String(a.tool).localeCompare(String(b.tool)))).toEqual(labels.map((tool) => ({ tool, outcome: "tool_error" })));
    expect(calls.map(value)).toEqual([1, 1, 1]);
    expect(points("svc.tool.duration").map((p) => Number(p.count))).toEqual([1, 1, 1]);
    // None of them reached a tool.
    expect(rig.tools.calls.items).toHaveLength(0);
  });

  it("stops cleanly when the collector is unreachable: the failed export is logged, not thrown", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as import("node:net").AddressInfo;
    await new Promise((resolve) => closed.close(resolve)); // nothing listens there now
    rig = await Rig.start({ host: { env: { TOOL_TOKEN, OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` } } });
    const fake = await rig.open("sess-dead-collector");
    await opened(fake);
    const turn = rig.run(fake, `[[tool get_weather {"city":"Paris"}]]`, { traceparent: TRACEPARENT });
    expect((await turnEnd(fake, turn)).status).toBe("completed");
    const stopping = rig;
    rig = undefined;
    await stopping.stop(); // the exporters retry ECONNREFUSED until their timeout; shutdown resolves
    const warned = stopping.logs.items.filter((l) => l.level === "warn").map((l) => l.msg);
    expect(warned.some((m) => /^telemetry shutdown (failed|timed out)$/.test(m))).toBe(true);
    expect(telemetry().enabled).toBe(false);
  }, FLUSH_TIMEOUT_MS + 10_000); // the exporters may retry ECONNREFUSED until the shutdown's own bound

  it("without OTEL_EXPORTER_OTLP_ENDPOINT sends nothing, and the turn and its tool call work the same", async () => {
    rig = await Rig.start(); // env: the tool token only
    expect(telemetry().enabled).toBe(false);
    const fake = await rig.open("sess-quiet");
    await opened(fake);
    const turn = rig.run(fake, `[[tool get_weather {"city":"Paris"}]]`, { traceparent: TRACEPARENT });
    expect((await turnEnd(fake, turn)).status).toBe("completed");
    expect(fake.turn(turn).find((m) => m.t === "tool_result")).toMatchObject({ result: { content: [{ type: "text", text: "sunny, 21 C" }] } });
    // Without export the run's traceparent reaches the tool as it came.
    expect(rig.tools.calls.items[0]!.headers.traceparent).toBe(TRACEPARENT);
    await telemetry().flush();
    await rig.stop();
    rig = undefined;
    expect(received.requests).toBe(0);
  });
});
