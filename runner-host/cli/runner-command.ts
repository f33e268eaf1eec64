/**
 * `svc runner -config <path>`: a runner-host on its own, dialling the configured service
 * (`public_url`) with the secret named by `runners.token_env`, announcing its region. Runs until
 * SIGINT/SIGTERM, then drains (docs/api.md "Shutdown and readiness": exit within about 20 s).
 *
 * Operations: one runner-host per `data_dir` (a lock; a second one exits 1 naming the holder);
 * `<data_dir>/status.json` for health checks (`svc runner -status`); loud error logs when the
 * service cannot be reached or refuses the runner (wrong secret, protocol, region); after
 * `MAX_REFUSALS` refusals in a row it exits 1, since retrying cannot fix a configuration.
 */
import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import type { RunnerConfig } from "../../src/shared/runner-config-schema.ts";
import { resolveDataDir } from "./config-file.ts";
import { dataDirProblem, makePrivateDataDir } from "./data-dir-usable.ts";
import { harnessUidRange, harnessUserProblem, sweepStaleHarnessDirs } from "../harness/harness-users.ts";
import { harnessIdentity } from "../harness/clean-spawn.ts";
import { acquireDataDirLock } from "./data-dir-lock.ts";
import { minFreeFrom } from "./disk-room.ts";
import { log } from "../log.ts";
import { RunnerHost } from "../runner-host.ts";
import { persistedRunnerId } from "./runner-id.ts";
import { insecureSecretTarget } from "../socket.ts";
import { readStatus, startStatusFile } from "./status-file.ts";

/**
 * Hard deadline for the drain after a signal, ms: "about 20 s" (docs/api.md "Shutdown and
 * readiness"), with margin.
 */
const EXIT_DEADLINE_MS = 18_000;
/**
 * Refusals in a row after which `svc runner` gives up (exit 1). With the reconnect backoff (100 ms
 * doubling to 5 s, ±25%) ten take about 21 s (measured 21.6–22.5 s): long enough to ride out a deploy that briefly
 * serves an older Worker, short enough that a wrong secret surfaces as a failing container.
 */
export const MAX_REFUSALS = 10;
/** Consecutive unreachable dials between two error lines after the first, to keep logs readable. */
const UNREACHABLE_LOG_EVERY = 10;

export async function runRunnerHost(o: { config: RunnerConfig; configPath: string }): Promise<number> {
  const { config } = o;
  const secret = process.env[config.runners.token_env]!;
  const insecure = insecureSecretTarget(config.public_url);
  if (insecure) {
    log("error", "svc runner refuses public_url", { public_url: config.public_url, reason: insecure });
    return 1;
  }
  const dataDir = resolveDataDir(config);
  // Read by the health check (`-status`), refused here so a bad value stops the start, not the checks.
  const minFree = minFreeFrom(process.env);
  const unusable = (minFree.ok ? null : minFree.problem) ?? dataDirProblem(dataDir) ?? harnessUserProblem() ?? makePrivateDataDir(dataDir);
  if (unusable !== null) {
    log("error", `svc: could not start: ${unusable}`);
    return 1;
  }
  const lock = acquireDataDirLock(dataDir);
  if (!lock.ok) {
    log("error", "data_dir is in use by another svc process (a runner-host or a local stack): give each its own data_dir", {
      data_dir: dataDir,
      holder_pid: lock.holder.pid,
      holder_host: lock.holder.host,
    });
    return 1;
  }
  const rootDir = harnessRoot(dataDir);
  const runnerId = persistedRunnerId(dataDir);

  let refusals = 0;
  let unreachable = 0;
  let gaveUp: (() => void) | undefined;
  const refusedTooOften = new Promise<"refused">((resolve) => (gaveUp = () => resolve("refused")));
  const host = new RunnerHost({
    baseUrl: config.public_url,
    secret,
    runnerId,
    config,
    region: config.region,
    rootDir,
    control: {
      onConnectionChange: (connected) => {
        if (connected) refusals = unreachable = 0;
        status.write();
      },
      onRefused: (code, message) => {
        unreachable = 0;
        // 5xx: the service is there but failing (a deploy in progress); that is not a refusal.
        if (code >= 500) return log("error", "the service failed the runner connection", { url: config.public_url, status: code });
        refusals++;
        log("error", refusalText(code), { url: config.public_url, status: code, reason: message, refusals, max_refusals: MAX_REFUSALS });
        status.write();
        if (refusals >= MAX_REFUSALS) gaveUp?.();
      },
      onUnreachable: (error) => {
        if (unreachable++ % UNREACHABLE_LOG_EVERY === 0) {
          log("error", "cannot reach public_url", { url: config.public_url, error, attempts: unreachable });
        }
      },
    },
  });
  const status = startStatusFile(dataDir, () => ({
    runner_id: runnerId,
    boot: host.boot,
    region: config.region,
    public_url: config.public_url,
    connected: host.connected,
    draining: host.draining,
    sessions: host.sessions().length,
    capacity: host.capacity(),
    refusals,
  }), (error) => log("error", "could not write the status file", { data_dir: dataDir, error }));
  host.start();
  log("info", "runner-host started", {
    url: config.public_url,
    region: config.region,
    boot: host.boot,
    data_dir: dataDir,
    harnesses: Object.keys(config.harnesses).join(","),
  });

  const onSignal = new Promise<NodeJS.Signals>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  // Node's default for SIGHUP is to die at once (no drain: running turns fail after the link's
  // grace). A runner-host reads its file at start only, so a reload signal changes nothing.
  const onHangup = () => log("warn", "SIGHUP ignored: a runner-host reads its configuration at start only (restart it to apply changes)");
  process.on("SIGHUP", onHangup);
  // Still ignored while it drains and until it exits: a SIGHUP then would kill it halfway (sessions left, lock kept).
  const why = await Promise.race([onSignal, refusedTooOften]);
  if (why === "refused") log("error", "giving up: the service refused this runner-host every time", { refusals });
  else log("info", "stopping", { signal: why });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), EXIT_DEADLINE_MS)));
  const outcome = await Promise.race([host.stop().then(() => "ok" as const, () => "failed" as const), deadline]);
  clearTimeout(timer);
  // The SIGHUP listener stays: the process exits right after this returns, and one arriving in
  // between would otherwise kill it with 129 (a clean stop reported as a crash).
  status.write();
  status.stop();
  lock.release();
  if (outcome !== "ok") log("error", "runner-host did not stop cleanly", { outcome });
  else log("info", "stopped");
  const code = outcome === "ok" && why !== "refused" ? 0 : 1;
  // Drained: sessions detached, harnesses stopped, telemetry flushed, lock released. Sockets still
  // finishing a close handshake must not hold the exit (measured: ~10 s), which a container's stop
  // grace would count; the exit happens right after this returns.
  setTimeout(() => process.exit(code), 0).unref();
  return code;
}

function refusalText(code: number): string {
  if (code === 401 || code === 403) return "the service refused the runner secret";
  if (code === 409) return "the service refused this runner-host";
  return "the service refused the runner connection";
}

/** `svc runner -config <path> -status`: prints the status file; exit 0 only when healthy. */
export function printRunnerStatus(config: RunnerConfig): number {
  const minFree = minFreeFrom(process.env);
  const r = minFree.ok ? readStatus(resolveDataDir(config), { minFree: minFree.bytes }) : { healthy: false, problem: minFree.problem };
  process.stdout.write(`${JSON.stringify({ healthy: r.healthy, problem: r.problem, ...r.status })}\n`);
  return r.healthy ? 0 : 1;
}

/**
 * Where harness processes get their private directories. Emptied at start: whatever a previous
 * run left (it was killed before cleaning up) belongs to processes that no longer exist.
 */
export function harnessRoot(dataDir: string): string {
  const dir = path.join(dataDir, "harness");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // Harnesses with users of their own keep their private directories in the temporary directory:
  // what a killed runner-host left there goes too.
  if (harnessIdentity() === "own") sweepStaleHarnessDirs(harnessUidRange(process.env.SVC_HARNESS_UIDS), log);
  return dir;
}
