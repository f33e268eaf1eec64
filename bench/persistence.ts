/**
 * Persistence, measured side by side in one run on the real local stack:
 *
 * 1. Upload throughput: a session with a long history (user messages of 60 KiB, no runner, so
 *    nothing else runs) is flushed; MiB/s = history bytes ÷ flush time. Targets: S3 at
 *    @20minutes/s3rver (SigV4 checked) and R2 through workerd's R2 binding. Beside it, the same
 *    bytes PUT straight to s3rver from this process as 64 KiB objects one after another (aws4fetch),
 *    the floor any uploader on this box shares.
 * 2. Turn latency while the session uploads: POST of a 60 KiB message → its `session.status idle`
 *    on the session's SSE stream, with persistence to s3rver uploading every second (each turn
 *    adds ~120 KiB to upload), beside the same turns on a stack without persistence.
 *
 *   node bench/persistence.ts [--mib 16] [--runs 3] [--turns 30]
 */
import { AwsClient } from "aws4fetch";
import { parseArgs } from "node:util";
import { S3_KEY, startS3, type S3Peer } from "../test/helpers/s3.ts";
import { api, auth, harnessCommand, machine, ms, now, request, runBench, startBenchStack, startProvider, stats } from "./lib.ts";

const { values } = parseArgs({ options: { mib: { type: "string", default: "16" }, runs: { type: "string", default: "3" }, turns: { type: "string", default: "30" } } });
const MIB = Number(values.mib);
const RUNS = Number(values.runs);
const TURNS = Number(values.turns);
const TEXT = "x".repeat(60 * 1024);
const LIMITS = { queue: 1024, input_bytes: 65_536 };

const s3Persistence = (s3: S3Peer, interval: number) => ({
  persistence: { provider: "s3", bucket: s3.bucket, region: "us-east-1", endpoint: s3.url, access_key_env: "S3_A", secret_key_env: "S3_S", interval_seconds: interval },
});
const s3Env = { S3_A: S3_KEY, S3_S: S3_KEY };

await runBench(10 * 60_000, async () => {
  const provider = await startProvider();
  const s3 = await startS3();
  const messages = Math.ceil((MIB * 1024 * 1024) / (TEXT.length + 200));
  console.log(`# persistence bench — ${machine()}\n`);

  // 1. Upload throughput.
  const throughput: Record<string, number[]> = { s3rver: [], "r2 binding": [] };
  const r2 = { persistence: { provider: "r2", bucket: "svc-sessions", endpoint: "http://127.0.0.1:9", access_key_env: "R2_A", secret_key_env: "R2_S", interval_seconds: 3600 } };
  for (const [name, more] of [
    ["s3rver", { config: s3Persistence(s3, 3600), env: s3Env }],
    ["r2 binding", { config: r2, env: { R2_A: "unused", R2_S: "unused" } }],
  ] as const) {
    const stack = await startBenchStack(provider.url, { pi: { command: harnessCommand } }, LIMITS, { ...more, runner: false });
    const a = api(stack.url);
    for (let run = 0; run < RUNS; run++) {
      const id = await a.create("pi");
      for (let i = 0; i < messages; i++) await a.send(id, TEXT);
      const t0 = now();
      const f = await request("POST", `${stack.url}/sessions/${id}/flush`, {}, auth);
      const secs = (now() - t0) / 1000;
      if (f.status !== 200 || f.body.pending) throw new Error(`flush: ${f.status} ${JSON.stringify(f.body)}`);
      throughput[name]!.push(f.body.history_bytes / 1024 / 1024 / secs);
    }
    await stack.stop();
  }
  const client = new AwsClient({ accessKeyId: S3_KEY, secretAccessKey: S3_KEY, service: "s3", region: "us-east-1" });
  const block = new Uint8Array(64 * 1024).fill(120);
  const directRuns: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const t0 = now();
    const n = Math.ceil((MIB * 1024 * 1024) / block.byteLength);
    for (let i = 0; i < n; i++) {
      const r = await client.fetch(`${s3.url}/${s3.bucket}/direct/${run}/${i}`, { method: "PUT", body: block });
      if (!r.ok) throw new Error(`direct PUT ${r.status}`);
    }
    directRuns.push((n * block.byteLength) / 1024 / 1024 / ((now() - t0) / 1000));
  }
  const direct = stats(directRuns).p50;
  console.log(`## Upload throughput (history ≈ ${MIB} MiB of 60 KiB messages, ${RUNS} runs, median)\n`);
  console.log("| target | MiB/s | ÷ direct PUTs to s3rver |\n| --- | --- | --- |");
  for (const [name, xs] of Object.entries(throughput)) console.log(`| service flush → ${name} | ${ms(stats(xs).p50)} | ${ms(stats(xs).p50 / direct)} |`);
  console.log(`| direct 64 KiB PUTs → s3rver | ${ms(direct)} | 1.00 |\n`);

  // 2. Turn latency with and without persistence uploading.
  const latency: Record<string, number[]> = {};
  for (const [name, more] of [
    ["persistence off", {}],
    ["s3rver, uploading every 1 s", { config: s3Persistence(s3, 1), env: s3Env }],
    ["persistence off (again)", {}],
  ] as const) {
    const stack = await startBenchStack(provider.url, { pi: { command: harnessCommand } }, LIMITS, more);
    const a = api(stack.url);
    const id = await a.create("pi");
    let idle: ((t: number) => void) | undefined;
    const stream = a.stream(id, (event, data, t) => {
      if (event === "session.status" && JSON.parse(data).data.status === "idle") idle?.(t);
    });
    await stream.ready;
    const xs: number[] = [];
    for (let i = 0; i < TURNS + 3; i++) {
      const done = new Promise<number>((r) => (idle = r));
      const t0 = now();
      await a.send(id, TEXT);
      const t1 = await done;
      if (i >= 3) xs.push(t1 - t0); // three warm-up turns start the harness
    }
    stream.close();
    latency[name] = xs;
    await stack.stop();
  }
  console.log(`## Turn latency, 60 KiB message → idle (${TURNS} turns after 3 warm-up)\n`);
  console.log("| stack | p50 ms | p99 ms |\n| --- | --- | --- |");
  for (const [name, xs] of Object.entries(latency)) console.log(`| ${name} | ${ms(stats(xs).p50)} | ${ms(stats(xs).p99)} |`);
  await s3.stop();
});
