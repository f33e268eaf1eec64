/**
 * 50 sessions with turns in flight at once on the real local stack, beside 50 closed loops
 * straight against the same scripted provider, in one run; then memory per attached idle session.
 *
 *   service  50 sessions (created and attached to an SSE stream each up front; creation not
 *            timed). Closed loops: POST user.message `[[deltas 50]]` → wait for that input's
 *            `session.status idle` frame (or a `session.error` naming it) on its stream → next message.
 *   direct   50 closed loops: POST the same directive to the provider → read to [DONE].
 * Turns/s counts turns that END inside the window after a warm-up (standard closed-loop
 * throughput); latency is request → end of each such turn. The window is 20 s, longer than the
 * runner-host's 10 s interrupt watchdog, so what that watchdog does under load (see anomalies)
 * lands inside it instead of just after it. The direct anchor runs before and after the service
 * window and is averaged, so drift during the run hits both columns.
 *
 * Settings: limits.active 64 (≥ 50 resident sessions), harness max_shared 16 × max_hosts 4
 * = 64 session slots (50 fit: 16+16+16+2), max_active_turns = max_shared (16 per process).
 *
 * Memory: RSS from /proc of the stack's tree, split into the svc process (Miniflare host + the
 * in-process runner-host), its harness children, and workerd (the Worker and its Durable Objects).
 * "Per attached idle session" = (svc + harnesses with 50 idle attached sessions − the same with
 * zero sessions right after start) ÷ 50. It is read right after one turn per session, run one
 * session at a time, and BEFORE the load phase: under load the runner-host's interrupt watchdog
 * kills harness processes 10 s after some turns (see anomalies), which detaches their sessions,
 * so "50 attached" would not hold afterwards. The reading is marked invalid unless the expected
 * number of harness processes is up and no "session detached" was logged before it. The same
 * after closing all 50 (harness processes gone) is printed as a cross-check: what the svc
 * process keeps (heap growth, JIT) is not per session.
 * A turn that ends failed/interrupted under load is counted as an error; the loop resumes the
 * session and goes on, as a client would.
 *
 *   npm run bench:concurrency [-- --sessions 50 --window 20 --warm 2 | -- --short]
 */
import { anomalies, api, auth, closedLoop, trackCpu, direct, harnessCommand, machine, ms, now, request, runBench, sleep, stackMemory, startBenchStack, startProvider, stats } from "./lib.ts";
import { benchArgs } from "./args.ts";
import { harnessProfileFlag, profileEnv, readHarnessProfiles, readNodeProfiles, saveProfile, startWorkerdProfile, summarize } from "./profile.ts";

/** BENCH_PROFILE=<dir>: CPU profiles of workerd (load phase), the svc process and the harness processes (whole run). */
const PROFILE_DIR = process.env.BENCH_PROFILE;
const INSPECT_PORT = 9339;

/** settle: seconds after the load phase in which anomalies still count (the watchdog fires ≤ 10 s after a turn). */
const sizes = benchArgs({ sessions: 50, window: 20, warm: 2, settle: 11 }, { sessions: 4, window: 2, warm: 1, settle: 1 });
const C = sizes.sessions;
const WINDOW_MS = sizes.window * 1000;
const WARM_MS = sizes.warm * 1000;
const TEXT = "[[deltas 50]]";
/** spares: the pool's default, written out because the closed-stack reading waits for it to be all that is left. */
const HARNESS = {
  command: PROFILE_DIR ? [harnessCommand[0]!, harnessProfileFlag(PROFILE_DIR), ...harnessCommand.slice(1)] : harnessCommand,
  max_shared: 16,
  max_hosts: 4,
  spares: 1,
};
const LIMITS = { active: 64 };

/** Median of three RSS readings 300 ms apart (RSS moves with GC). */
async function memory(stack: Parameters<typeof stackMemory>[0]) {
  const xs: ReturnType<typeof stackMemory>[] = [];
  for (let i = 0; i < 3; i++) (xs.push(stackMemory(stack)), await sleep(300));
  const m = (f: (x: (typeof xs)[0]) => number) => stats(xs.map(f)).p50;
  return { svc: m((x) => x.svcMiB), harness: m((x) => x.harnessMiB), workerd: m((x) => x.workerdMiB), procs: m((x) => x.harnessCount), each: xs.at(-1)!.harnessEach };
}

await runBench(5 * 60_000, async () => {
  const provider = await startProvider();
  const stack = await startBenchStack(provider.url, { pi: HARNESS }, LIMITS, { env: PROFILE_DIR ? profileEnv(PROFILE_DIR, INSPECT_PORT) : {} });
  const a = api(stack.url);
  await sleep(2000); // let start-up settle before the zero-session reading
  const mem0 = await memory(stack);

  // 50 sessions, each with its SSE stream open for the whole run.
  const ids = await Promise.all(Array.from({ length: C }, () => a.create("pi")));
  const ends = ids.map(() => ({ status: new Map<string, string>(), wake: () => {} }));
  const streams = ids.map((id, i) =>
    a.stream(id, (event, data) => {
      // A turn ends with its `session.status idle`, or with a `session.error` naming its input
      // (the `failed`/`interrupted` status after it carries no input_id).
      if (event !== "session.status" && event !== "session.error") return;
      const e = JSON.parse(data);
      const how = event === "session.error" ? `error ${e.data.code}: ${e.data.message}` : e.data.status;
      if (e.input_id && how !== "running") (ends[i]!.status.set(e.input_id, how), ends[i]!.wake());
    }),
  );
  await Promise.all(streams.map((s) => s.ready));

  const turn = async (i: number) => {
    const end = ends[i]!;
    const input = await a.send(ids[i]!, TEXT);
    const deadline = now() + 60_000;
    while (!end.status.has(input)) {
      if (now() > deadline) throw new Error(`turn ${input} did not end within 60 s`);
      await new Promise<void>((r) => ((end.wake = r), setTimeout(r, 1000)));
    }
    const status = end.status.get(input);
    end.status.delete(input);
    if (status !== "idle") {
      // Wait for the session to leave `running`, then resume it, as a client would.
      for (let t = 0; t < 50; t++) {
        if ((await request("POST", `${stack.url}/sessions/${ids[i]}/resume`, {}, auth)).status === 200) break;
        await sleep(100);
      }
      throw new Error(`turn ended with ${status}`);
    }
  };
  const directTurn = async () => {
    const r = await direct(provider.url, TEXT, () => {});
    if (r.deltas !== 50) throw new Error(`direct: ${r.deltas} deltas`);
  };

  // One turn per session, one session at a time: every session attached and open in a harness process.
  for (let i = 0; i < C; i++) await turn(i);
  await sleep(1000);
  const mem50 = await memory(stack);
  // The sessions' processes, and the spare where max_hosts leaves it room (at 50 sessions it has none).
  const sessionProcs = Math.ceil(C / HARNESS.max_shared);
  const wantProcs = Math.min(HARNESS.max_hosts, sessionProcs + HARNESS.spares);
  const memValid = mem50.procs === wantProcs && anomalies(stack).detached === 0; // all 50 still attached

  const d1 = await closedLoop(C, WARM_MS, WINDOW_MS, directTurn);
  const mark = stack.mark();
  const loadStart = Date.now();
  const profiler = PROFILE_DIR ? await startWorkerdProfile(INSPECT_PORT) : undefined;
  // CPU over exactly the counted window, against the turns that ended in it.
  let tracker: ReturnType<typeof trackCpu>;
  let cpu: Record<string, number> = {};
  const s = await closedLoop(C, WARM_MS, WINDOW_MS, turn, { open: () => (tracker = trackCpu(stack, provider.pid)), close: () => (cpu = tracker.stop()) });
  const workerdProfiles = await profiler?.stop();
  const d2 = await closedLoop(C, WARM_MS, WINDOW_MS, directTurn);
  await sleep(sizes.settle * 1000); // a watchdog armed by the last turns fires within 10 s: count it too
  const odd = anomalies(stack, mark);

  for (const st of streams) st.close();
  await Promise.all(ids.map((id) => a.close(id)));
  // The sessions' processes end; the pool then keeps (or starts) its spare, so that is what stays.
  for (let t = 0; t < 100 && stackMemory(stack).harnessCount > HARNESS.spares; t++) await sleep(100);
  await sleep(2000);
  const memClosed = await memory(stack);

  const dPerS = (d1.perS + d2.perS) / 2;
  const dLat = (d1.lat.p50 + d2.lat.p50) / 2;
  console.log(`\n${C} concurrent closed loops, ${TEXT}, ${WINDOW_MS / 1000} s window after ${WARM_MS / 1000} s warm-up (${machine()})`);
  console.log(`settings: limits.active ${LIMITS.active}; harness max_shared ${HARNESS.max_shared}, max_hosts ${HARNESS.max_hosts}, max_active_turns ${HARNESS.max_shared}; ${mem50.procs} harness processes for ${C} attached sessions\n`);
  console.log("| path | completed turns/s | per-turn latency p50, ms | p99, ms | turns/s ÷ direct | errors |");
  console.log("| --- | --- | --- | --- | --- | --- |");
  console.log(`| direct: provider → client (mean of before ${d1.perS.toFixed(0)} and after ${d2.perS.toFixed(0)}) | ${dPerS.toFixed(1)} | ${ms(dLat)} | ${ms(Math.max(d1.lat.p99, d2.lat.p99))} | 1.00 | ${d1.errors.length + d2.errors.length} |`);
  console.log(`| service: POST /events → idle frame | ${s.perS.toFixed(1)} | ${ms(s.lat.p50)} | ${ms(s.lat.p99)} | ${(s.perS / dPerS).toFixed(3)} (direct is ${(dPerS / s.perS).toFixed(0)}× faster) | ${s.errors.length} |`);
  if (s.errors.length) console.log(`first service errors: ${s.errors.slice(0, 3).join(" | ")}`);
  console.log(`service anomalies during and ≤ ${sizes.settle} s after the load phase: ${odd.watchdogKills} "harness did not end an interrupted turn; killing it" (no client interrupt was sent), ${odd.harnessLost} harness processes ended unasked${odd.lostAt.length ? ` (at ${odd.lostAt.map((t) => `+${((t - loadStart) / 1000).toFixed(1)}`).join(", ")} s; the service window is +${WARM_MS / 1000}…+${(WARM_MS + WINDOW_MS) / 1000} s)` : ""}`);
  const turns = s.perS * (WINDOW_MS / 1000);
  const cpuTurn = (k: string) => ((cpu[k]! * 1000) / turns).toFixed(1);
  console.log(`\nCPU ms per completed service turn (CPU in the window ÷ turns that ended in it): harness ${cpuTurn("harness")}, svc ${cpuTurn("svc")}, workerd ${cpuTurn("workerd")}, provider ${cpuTurn("provider")}, client ${cpuTurn("client")}`);

  const per = (x: number, y: number) => ((x - y) / C).toFixed(2);
  console.log(`\n| memory (RSS, MiB) | svc process | harness processes | svc + harnesses | workerd |`);
  console.log("| --- | --- | --- | --- | --- |");
  const row = (label: string, m: typeof mem0) => `| ${label} | ${m.svc.toFixed(1)} | ${m.harness.toFixed(1)} (${m.procs}) | ${(m.svc + m.harness).toFixed(1)} | ${m.workerd.toFixed(1)} |`;
  console.log(row("zero sessions, after start", mem0));
  console.log(row(`${C} sessions idle and attached (one turn each)${memValid ? "" : ` — INVALID: want ${wantProcs} harness processes and no session detached yet`}`, mem50));
  console.log(row(`all ${C} closed, their harness processes gone, the spare left (cross-check)`, memClosed));
  console.log(
    `| **per attached idle session** ((${C} attached − zero) ÷ ${C}) | ${per(mem50.svc, mem0.svc)} | ${per(mem50.harness, mem0.harness)} | **${per(mem50.svc + mem50.harness, mem0.svc + mem0.harness)}** | ${per(mem50.workerd, mem0.workerd)} |`,
  );
  // The pool fills a process to max_shared before starting the next (sessions attached one at a time).
  const fill = [...Array(mem50.procs)].map((_, k) => Math.max(0, Math.min(HARNESS.max_shared, C - k * HARNESS.max_shared))).join("+");
  console.log(`\nharness processes holding ${fill} sessions: ${mem50.each.map((x) => x.toFixed(0)).join(", ")} MiB RSS each (tree order) — the cost is mostly per process, not per session`);

  if (PROFILE_DIR && workerdProfiles) {
    workerdProfiles.forEach((p, k) => saveProfile(`${PROFILE_DIR}/workerd-${k}.cpuprofile`, p));
    console.log(`\n${summarize("workerd, load phase", workerdProfiles)}`);
    await stack.stop(); // Node writes the svc profile on exit
    console.log(`\n${summarize("svc process, whole run", readNodeProfiles(PROFILE_DIR))}`);
    console.log(`\n${summarize("harness processes, whole run", readHarnessProfiles(PROFILE_DIR))}`);
  }
});
