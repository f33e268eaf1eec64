/**
 * Preloaded into harness processes by `BENCH_PROFILE` (bench/profile.ts `harnessProfileFlag`):
 * samples the process with V8's profiler and writes what it has every PROFILE_CUT_MS into the
 * directory named by this module's URL (`?dir=`), as `harness-<pid>-<n>.cpuprofile`.
 *
 * Why cut while running: a harness ends by signal when the stack stops, so Node's own `--cpu-prof`
 * (written at a normal exit) never writes one. The directory, not the environment, carries the
 * place: the runner-host starts harnesses with a stripped environment.
 */
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";

/** How often the profile so far is written, ms: at most this much of the run's end is lost. */
const PROFILE_CUT_MS = 2_000;
/** Sampling interval, µs: coarser than workerd's 200, four harness processes share two CPUs. */
const SAMPLE_US = 500;

const dir = new URL(import.meta.url).searchParams.get("dir");
if (dir) {
  const session = new Session();
  session.connect();
  session.post("Profiler.enable");
  session.post("Profiler.setSamplingInterval", { interval: SAMPLE_US });
  session.post("Profiler.start");
  let n = 0;
  const cut = () =>
    session.post("Profiler.stop", (err, r) => {
      if (!err) writeFileSync(`${dir}/harness-${process.pid}-${n++}.cpuprofile`, JSON.stringify(r.profile));
      session.post("Profiler.start");
    });
  setInterval(cut, PROFILE_CUT_MS).unref();
  process.on("exit", cut);
}
