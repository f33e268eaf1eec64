/**
 * Every `svc.*` metric on the real local stack (docs/design-notes.md "Telemetry"), as received by a real
 * OTLP/HTTP receiver (@elastic/mockotlpserver): the Worker and its objects export `svc.http.*`,
 * `svc.transcript.bytes` and the uploads' `svc.sync.*` (persistence to a real S3 peer, s3rver, taken
 * down for one flush so an upload fails), the runner-host the turn and tool metrics; all under
 * `service.name=svc`, within 20 s of the traffic that makes them, and none with a tenant or session
 * label.
 */
import { createRequire } from "node:module";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { SvcClient } from "../../client/index.ts";
import { METRICS, type MetricName } from "../../src/shared/metric-catalog.ts";
import { call, checkedFetch } from "../helpers/api.ts";
import { S3_KEY, startS3, type S3Peer } from "../helpers/s3.ts";
import { openSse } from "../helpers/sse.ts";
import { secret, startStack, type Stack, REFERENCE_HARNESSES, scriptedProviders } from "../helpers/stack.ts";

type Attrs = Record<string, unknown>;
type Point = { attributes: Attrs; asInt?: number | string; asDouble?: number; count?: number | string };
type Metric = { name: string; sum?: { dataPoints: Point[] }; histogram?: { dataPoints: Point[] }; gauge?: { dataPoints: Point[] } };
type Metrics = { resourceMetrics: { resource: { attributes: Attrs }; scopeMetrics: { metrics: Metric[] }[] }[] };
type MockOtlp = {
  MockOtlpServer: new (o: object) => { httpUrl: URL; start(): Promise<void>; close(): Promise<void> };
  normalizeMetrics(raw: unknown): Metrics;
};
const { MockOtlpServer, normalizeMetrics } = createRequire(import.meta.url)("@elastic/mockotlpserver") as MockOtlp;

/** Every metric of the catalog (src/shared/metric-catalog.ts). */
const EXPECTED = Object.keys(METRICS) as MetricName[];
const TENANT = "acme-telemetry";
const env = { MANAGE: secret("otel-manage"), OPENAI_KEY: "sk-otel", TOOL_TOKEN: secret("otel-tool"), S3_ACCESS: S3_KEY, S3_SECRET: S3_KEY };

type Seen = { resource: Attrs; metric: Metric };
const seen: Seen[] = [];
const waiters: (() => void)[] = [];
let receiver: InstanceType<MockOtlp["MockOtlpServer"]>;
let provider: ScriptedProvider;
let tool: http.Server;
let s3: S3Peer;
let stack: Stack;

beforeAll(async () => {
  receiver = new MockOtlpServer({
    logLevel: "warn",
    services: ["http"],
    httpHostname: "127.0.0.1",
    httpPort: 0,
    onTrace: () => {},
    onMetrics: (raw: unknown) => {
      for (const rm of normalizeMetrics(raw).resourceMetrics) {
        for (const sm of rm.scopeMetrics) for (const metric of sm.metrics) seen.push({ resource: rm.resource.attributes, metric });
      }
      for (const w of waiters.splice(0)) w();
    },
  });
  await receiver.start();
  provider = await startScriptedProvider();
  s3 = await startS3();
  tool = http.createServer((req, res) => {
    req.resume().on("end", () => res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ content: [{ type: "text", text: "sunny" }] })));
  });
  await new Promise<void>((r) => tool.listen(0, "127.0.0.1", r));
  stack = await startStack({
    config: {
      tokens: [{ token_env: "MANAGE", tenant: TENANT, manage: true }],
      harnesses: REFERENCE_HARNESSES,
      providers: scriptedProviders(provider.url),
      tools: [
        {
          name: "weather",
          description: "weather",
          input_schema: { type: "object" },
          url: `http://127.0.0.1:${(tool.address() as AddressInfo).port}/weather`,
          tenants: [TENANT],
          token_env: "TOOL_TOKEN",
        },
      ],
      // Uploads only when flushed: the test decides when one fails and when one succeeds.
      persistence: {
        provider: "s3",
        bucket: s3.bucket,
        endpoint: s3.url,
        region: "us-east-1",
        access_key_env: "S3_ACCESS",
        secret_key_env: "S3_SECRET",
        interval_seconds: 3600,
      },
    },
    env: { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.httpUrl.href.replace(/\/$/, "") },
  });
});
afterAll(async () => {
  await stack?.stop();
  await provider?.close();
  tool?.close();
  await s3?.stop();
  await receiver?.close();
});

/** Resolves once every name in `names` has been received, or fails after `ms`. */
function received(names: readonly string[], ms: number): Promise<void> {
  const missing = () => names.filter((n) => !seen.some((s) => s.metric.name === n));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`not received within ${ms} ms: ${missing().join(", ")}`)), ms);
    const check = () => (missing().length === 0 ? (clearTimeout(t), resolve()) : waiters.push(check));
    check();
  });
}

const points = (name: string) => seen.filter((s) => s.metric.name === name).flatMap((s) => (s.metric.sum ?? s.metric.histogram ?? s.metric.gauge)!.dataPoints);
const total = (name: string, pred: (a: Attrs) => boolean = () => true) =>
  points(name).filter((p) => pred(p.attributes)).reduce((n, p) => n + Number(p.asInt ?? p.asDouble ?? p.count ?? 0), 0);

describe("metrics over OTLP", () => {
  it("every svc.* metric arrives within 20 s of the traffic, with its labels and none naming a tenant or session", async () => {
    const svc = new SvcClient({ baseUrl: stack.url, token: env.MANAGE, fetch: checkedFetch });
    const s = await svc.createSession({ harness: "pi", config: { model: "openai/gpt-4o-mini", tools: ["weather"] } });
    const sse = await openSse(`${stack.url}/sessions/${s.id}/events`, { token: env.MANAGE });
    const m = await svc.sendMessage(s.id, `[[tool weather {"city":"Oslo"}]]`);
    await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === m.id, 30_000);
    sse.close();
    // Uploads: one round fails (storage down), the next succeeds.
    await s3.stop();
    expect((await svc.flush(s.id)).pending).toBe(true);
    await s3.start();
    expect((await svc.flush(s.id)).pending).toBe(false);
    // Error answers: 401 (bad token), 404 (unknown session), 400 (unknown field).
    expect((await call(stack.url, "GET", "/sessions", { token: "not-a-token-at-all-0000000000" })).status).toBe(401);
    expect((await call(stack.url, "GET", `/sessions/${"0".repeat(32)}`, { token: env.MANAGE })).status).toBe(404);
    expect((await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", nope: 1 } })).status).toBe(400);

    await received(EXPECTED, 20_000);

    // Worker: requests by route template and method, SSE counted; errors by code.
    const byRoute = (route: string, method: string) => (a: Attrs) => a.route === route && a.method === method;
    expect(total("svc.http.requests", byRoute("/sessions", "POST"))).toBeGreaterThanOrEqual(2);
    expect(total("svc.http.requests", byRoute("/sessions/{id}/events", "GET"))).toBeGreaterThanOrEqual(1);
    expect(points("svc.http.requests").every((p) => /^[1-5][0-9]{2}$/.test(String(p.attributes.status)))).toBe(true);
    expect(points("svc.http.duration").some((p) => p.attributes.route === "/sessions/{id}" && p.attributes.method === "GET")).toBe(true);
    expect(total("svc.http.rejected", (a) => a.code === "forbidden")).toBeGreaterThanOrEqual(1);
    expect(total("svc.http.rejected", (a) => a.code === "not_found")).toBeGreaterThanOrEqual(1);
    expect(total("svc.http.rejected", (a) => a.code === "invalid_request")).toBeGreaterThanOrEqual(1);
    expect(total("svc.transcript.bytes")).toBeGreaterThan(0);
    // Uploads: every round timed, the failed one counted, the backlog reported as a gauge.
    expect(total("svc.sync.duration")).toBeGreaterThanOrEqual(2);
    expect(total("svc.sync.failures")).toBeGreaterThanOrEqual(1);
    expect(points("svc.sync.pending").length).toBeGreaterThan(0);
    // Runner-host: the tool call by tool and outcome, startup by harness.
    expect(total("svc.tool.calls", (a) => a.tool === "weather" && a.outcome === "success")).toBe(1);
    expect(points("svc.runner.startup").map((p) => p.attributes)).toContainEqual({ harness: "pi" });

    // Labels: only the catalog's, never a tenant, a session or an id.
    for (const { resource, metric } of seen) {
      expect(resource["service.name"]).toBe("svc");
      const allowed: readonly string[] = METRICS[metric.name as MetricName]?.labels ?? [];
      for (const p of (metric.sum ?? metric.histogram ?? metric.gauge)!.dataPoints) {
        for (const k of Object.keys(p.attributes)) expect(allowed, `${metric.name} label ${k}`).toContain(k);
        const text = JSON.stringify(p.attributes);
        expect(text).not.toMatch(/tenant|session_id/i);
        for (const v of [TENANT, s.id, m.id]) expect(text).not.toContain(v);
      }
    }
  });
});
