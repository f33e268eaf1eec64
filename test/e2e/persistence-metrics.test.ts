/**
 * Sync metrics (spec "Operational behaviour"): `svc.sync.pending`, `svc.sync.duration`,
 * `svc.sync.failures` and `svc.transcript.bytes` reach a real OTLP/HTTP receiver
 * (@elastic/mockotlpserver) from the local stack, with no tenant or session label.
 */
import { createRequire } from "node:module";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startScriptedProvider, type ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call } from "../helpers/api.ts";
import { baseEnv, createSession, stackConfig, TOKEN, turn } from "../helpers/persistence.ts";
import { S3_KEY, startS3, type S3Peer } from "../helpers/s3.ts";
import { startStack } from "../helpers/stack.ts";

type Point = { attributes: Record<string, unknown>; asInt?: number | string; asDouble?: number; count?: number | string };
type Metric = { name: string; sum?: { dataPoints: Point[] }; histogram?: { dataPoints: Point[] }; gauge?: { dataPoints: Point[] } };
type Metrics = { resourceMetrics: { scopeMetrics: { metrics: Metric[] }[] }[] };
type MockOtlp = {
  MockOtlpServer: new (o: object) => { httpUrl: URL; start(): Promise<void>; close(): Promise<void> };
  normalizeMetrics(raw: unknown): Metrics;
};
const { MockOtlpServer, normalizeMetrics } = createRequire(import.meta.url)("@elastic/mockotlpserver") as MockOtlp;

let provider: ScriptedProvider;
let s3: S3Peer;
let receiver: InstanceType<MockOtlp["MockOtlpServer"]>;
const received: Metrics[] = [];

beforeAll(async () => {
  provider = await startScriptedProvider();
  s3 = await startS3();
  receiver = new MockOtlpServer({ logLevel: "warn", services: ["http"], httpHostname: "127.0.0.1", httpPort: 0, onMetrics: (m: unknown) => received.push(normalizeMetrics(m)) });
  await receiver.start();
});
afterAll(async () => {
  await receiver?.close();
  await s3?.stop();
  await provider?.close();
});

function points(name: string): Point[] {
  const all = received.flatMap((m) => m.resourceMetrics.flatMap((rm) => rm.scopeMetrics.flatMap((sm) => sm.metrics)));
  const m = all.findLast((x) => x.name === name);
  if (!m) throw new Error(`metric ${name} not received; got ${[...new Set(all.map((x) => x.name))].join(", ")}`);
  return (m.sum ?? m.histogram ?? m.gauge)!.dataPoints;
}

it("exports svc.sync.pending, svc.sync.duration, svc.sync.failures and svc.transcript.bytes without tenant or session labels", async () => {
  const persistence = { provider: "s3", bucket: "sess", endpoint: s3.url, region: "us-east-1", access_key_env: "S3_ACCESS", secret_key_env: "S3_SECRET", interval_seconds: 3600 };
  const env = { ...baseEnv, S3_ACCESS: S3_KEY, S3_SECRET: S3_KEY, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.httpUrl.href.replace(/\/$/, "") };
  const stack = await startStack({ config: stackConfig(provider, persistence), env });
  const s = await createSession(stack.url);
  await turn(stack.url, s, "count me");
  await s3.stop();
  expect((await call(stack.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN })).body.pending).toBe(true);
  await s3.start();
  expect((await call(stack.url, "POST", `/sessions/${s.id}/flush`, { token: TOKEN })).body.pending).toBe(false);
  s.sse.close();
  // Stopping exports what is pending: the runner-host reads the Worker's counts one last time.
  await stack.stop();

  const duration = points("svc.sync.duration");
  expect(duration.reduce((n, p) => n + Number(p.count), 0)).toBeGreaterThanOrEqual(2);
  expect(points("svc.sync.failures").reduce((n, p) => n + Number(p.asInt), 0)).toBeGreaterThanOrEqual(1);
  expect(points("svc.transcript.bytes").reduce((n, p) => n + Number(p.asInt), 0)).toBeGreaterThan(0);
  expect(points("svc.sync.pending").map((p) => Number(p.asInt))).toEqual([0]);
  for (const name of ["svc.sync.duration", "svc.sync.failures", "svc.transcript.bytes", "svc.sync.pending"]) {
    for (const p of points(name)) expect(Object.keys(p.attributes ?? {})).toEqual([]);
  }
});
