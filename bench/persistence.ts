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
 * 3. Admission: `POST /events` (→ 202) of a short message to a session that storage has caught up
 *    with (`POST /flush` just before), which first joins the deployment's upload backlog (one call
 *    to the SyncBacklog object), against the same session while it still waits to upload (no
 *    call). Pairs alternate in one session; each measured POST follows a 30 ms pause either way.
 *
 * Sessions are created, filled and flushed through the typed client (client/); the turn timings
 * read the SSE stream with the bench's own parser, like the other latency benches.
 *
 *   npm run bench:persistence [-- --mib 16 --runs 3 --turns 30 --warmup 3 | -- --short]
 */
import { AwsClient } from "aws4fetch";
import { SvcClient } from "../client/index.ts";
import { S3_KEY, startS3, type S3Peer } from "../test/helpers/s3.ts";
import { benchArgs } from "./args.ts";
import { api, harnessCommand, machine, ms, now, runBench, sleep, startBenchStack, startProvider, stats, TOKEN } from "./lib.ts";

const { mib: MIB, runs: RUNS, turns: TURNS, warmup: WARMUP } = benchArgs(
  { mib: 16, runs: 3, turns: 30, warmup: 3 },
  { mib: 1, runs: 1, turns: 2, warmup: 1 },
);
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
  const r2 = { persistence: { provider: "r2", bucket: "agent-session-service", endpoint: "http://127.0.0.1:9", access_key_env: "R2_A", secret_key_env: "R2_S", interval_seconds: 3600 } };
  for (const [name, more] of [
    ["s3rver", { config: s3Persistence(s3, 3600), env: s3Env }],
    ["r2 binding", { config: r2, env: { R2_A: "unused", R2_S: "unused" } }],
  ] as const) {
    const stack = await startBenchStack(provider.url, { pi: { command: harnessCommand } }, LIMITS, { ...more, runner: false });
    const svc = new SvcClient({ baseUrl: stack.url, token: TOKEN });
    for (let run = 0; run < RUNS; run++) {
      const { id } = await svc.createSession({ harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } });
      for (let i = 0; i < messages; i++) await svc.sendMessage(id, TEXT);
      const t0 = now();
      const f = await svc.flush(id);
      const secs = (now() - t0) / 1000;
      if (f.pending) throw new Error(`flush left the upload pending: ${JSON.stringify(f)}`);
      throughput[name]!.push(f.history_bytes / 1024 / 1024 / secs);
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
    for (let i = 0; i < TURNS + WARMUP; i++) {
      const done = new Promise<number>((r) => (idle = r));
      const t0 = now();
      await a.send(id, TEXT);
      const t1 = await done;
      if (i >= WARMUP) xs.push(t1 - t0); // warm-up turns start the harness
    }
    stream.close();
    latency[name] = xs;
    await stack.stop();
  }
  console.log(`## Turn latency, 60 KiB message → idle (${TURNS} turns after ${WARMUP} warm-up)\n`);
  console.log("| stack | p50 ms | p99 ms |\n| --- | --- | --- |");
  for (const [name, xs] of Object.entries(latency)) console.log(`| ${name} | ${ms(stats(xs).p50)} | ${ms(stats(xs).p99)} |`);

  // 3. Admission: a caught-up session joins the backlog before its message is recorded.
  {
    const stack = await startBenchStack(provider.url, { pi: { command: harnessCommand } }, LIMITS, { config: s3Persistence(s3, 3600), env: s3Env });
    const a = api(stack.url);
    const id = await a.create("pi");
    let idle: (() => void) | undefined;
    const stream = a.stream(id, (event, data) => {
      if (event === "session.status" && JSON.parse(data).data.status === "idle") idle?.();
    });
    await stream.ready;
    const turn = async (): Promise<number> => {
      const done = new Promise<void>((r) => (idle = r));
      await sleep(30);
      const t0 = now();
      await a.send(id, "[[deltas 20]]");
      const posted = now() - t0;
      await done;
      return posted;
    };
    const svc = new SvcClient({ baseUrl: stack.url, token: TOKEN });
    const catchUp = async () => {
      const f = await svc.flush(id);
      if (f.pending) throw new Error(`flush left the upload pending: ${JSON.stringify(f)}`);
    };
    for (let i = 0; i < WARMUP + 10; i++) await turn();
    const caughtUp: number[] = [];
    const queued: number[] = [];
    for (let i = 0; i < TURNS * 3; i++) {
      await catchUp();
      caughtUp.push(await turn());
      queued.push(await turn()); // the previous turn's events left the session waiting to upload
    }
    stream.close();
    await stack.stop();
    const C = stats(caughtUp);
    const Q = stats(queued);
    console.log(`\n## Admission: POST /events → 202, short message (${C.n} pairs, one session, s3rver, interval 3600 s)\n`);
    console.log("| session | p50 ms | p99 ms |\n| --- | --- | --- |");
    console.log(`| caught up (joins the upload backlog first) | ${ms(C.p50)} | ${ms(C.p99)} |`);
    console.log(`| still waiting to upload (no backlog call) | ${ms(Q.p50)} | ${ms(Q.p99)} |`);
    console.log(`| difference | ${ms(C.p50 - Q.p50)} | — |`);
  }
  await s3.stop();
});
