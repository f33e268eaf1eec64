/**
 * The local stack: the bundled Worker and its objects in Miniflare (state under `data_dir`), plus
 * a runner-host in this process dialling it over loopback: the same code paths as production.
 */
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import path from "node:path";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { parseListen, type HostConfig } from "../../src/shared/config-schema.ts";
import { referencedVariables } from "../../src/shared/config-vars.ts";
import { checkEnvironment } from "../../src/shared/config-env.ts";
import { DEFAULT_RUNNER_SECRET_VAR, DRAIN_PATH, END_STREAMS_PATH, STREAM_END_MS } from "../../src/runtime-constants.ts";
import { configuredRegions } from "../../src/runner/pool-name.ts";
import { EnvFileError, reloadEnvFileBeside, resolveDataDir } from "./config-file.ts";
import { log, relayLine, type LogFields } from "../log.ts";
import { CUT_REASON } from "../../src/sse/stream-rules.ts";
import { persistenceFsHandler } from "./persistence-fs.ts";
import { diskRoomHandler, minFreeFrom } from "./disk-room.ts";
import { RunnerHost } from "../runner-host.ts";
import { persistedRunnerId } from "./runner-id.ts";
import { acquireDataDirLock } from "./data-dir-lock.ts";
import { StartRefused } from "./start-refused.ts";
import { harnessUserProblem } from "../harness/harness-users.ts";
import { dataDirProblem, makePrivateDataDir, storeDirProblem } from "./data-dir-usable.ts";
import { harnessRoot } from "./runner-command.ts";
import { COMPATIBILITY_DATE, COMPATIBILITY_FLAGS, bundleWorker } from "./worker-bundle.ts";
import { DURABLE_OBJECTS } from "../../src/shared/worker-bindings.ts";
import { workerdInOwnSession } from "./workerd-session.ts";

/** The OTLP settings the Worker and its objects read too: they export their own svc.* metrics. */
const WORKER_TELEMETRY_VARS = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS"];

export type LocalStackOptions = {
  config: HostConfig;
  configPath: string;
  env?: NodeJS.ProcessEnv;
  /** false: no in-process runner-host (`svc -no-runner`): runner-hosts dial in separately. */
  runner?: boolean;
};

export type LocalStack = {
  url: string;
  /** Restarts the Worker runtime with the variables now in `env`, like a deploy (sockets drop). */
  reload(env: NodeJS.ProcessEnv): Promise<void>;
  stop(): Promise<void>;
};

/** Starts the stack; resolves once the HTTP port is bound. Signals are handled by `runLocalStack`. */
export async function launchLocalStack(o: LocalStackOptions): Promise<LocalStack> {
  const env = o.env ?? process.env;
  const t0 = performance.now();
  const dataDir = resolveDataDir(o.config);
  const minFree = minFreeFrom(env);
  if (!minFree.ok) throw new StartRefused(minFree.problem);
  const unusable = dataDirProblem(dataDir) ?? storeDirProblem(o.config) ?? (o.runner === false ? null : harnessUserProblem(env));
  if (unusable !== null) throw new StartRefused(unusable);
  const uncreatable = makePrivateDataDir(dataDir);
  if (uncreatable !== null) throw new StartRefused(uncreatable);
  // One stack per data_dir: a second one would share the objects' SQLite files (SQLITE_BUSY, 500s)
  // and the in-process runner-host's id. `svc runner` takes the same lock.
  const lock = acquireDataDirLock(dataDir);
  if (!lock.ok) {
    throw new StartRefused(`data_dir ${dataDir} is in use by another svc process (pid ${lock.holder.pid} on ${lock.holder.host}): give each stack its own data_dir`);
  }
  try {
    return await launchOn(o, env, dataDir, minFree.bytes, t0, lock.release);
  } catch (e) {
    lock.release();
    throw e;
  }
}

async function launchOn(o: LocalStackOptions, env: NodeJS.ProcessEnv, dataDir: string, minFree: number, t0: number, unlock: () => void): Promise<LocalStack> {
  const secretVar = o.config.runners?.token_env ?? DEFAULT_RUNNER_SECRET_VAR;
  const secret = o.config.runners ? env[secretVar]! : localRunnerSecret(dataDir);
  if (!o.config.runners && o.runner === false) {
    // Runner-hosts dialling in need this secret; without `runners` nothing else names it.
    log("warn", "no \"runners\" in the config: runner-hosts must present the generated secret in the file named here (or set runners.token_env)", { file: path.join(dataDir, "runner-secret") });
  }
  /** Exactly the variables the config names, never the whole host environment. */
  const bindingsFrom = (vars: NodeJS.ProcessEnv) => {
    const b: Record<string, string> = { HOST_CONFIG: JSON.stringify(o.config) };
    for (const name of [...referencedVariables(o.config), ...WORKER_TELEMETRY_VARS]) if (vars[name] !== undefined) b[name] = vars[name]!;
    b[secretVar] = secret;
    return b;
  };

  const listen = parseListen(o.config.listen)!;
  const script = await bundleWorker();
  // Made once: a reload keeps them, and with them which disks were already reported short.
  const services = serviceBindings(o.config, dataDir, minFree);
  const options = (bindings: Record<string, string>, port: number) => ({
    ...convertV4MiniflareOptions({
      // Module names are paths relative to `modulesRoot` (default: the working directory); workerd
      // refuses a name with "..", so a data_dir outside the working directory needs its own root.
      modulesRoot: dataDir,
      modules: [{ type: "ESModule" as const, path: path.join(dataDir, "worker.mjs"), contents: script }],
      compatibilityDate: COMPATIBILITY_DATE,
      compatibilityFlags: COMPATIBILITY_FLAGS,
      durableObjects: Object.fromEntries(
        Object.entries(DURABLE_OBJECTS).map(([binding, className]) => [binding, { className, useSQLite: true }]),
      ),
      bindings,
      ...services,
      cf: false,
      // Miniflare's request log: a formatted line POSTed back to this process for every request
      // (and ignored: logs are our own JSON lines). It cost ~10% of workerd's CPU under load.
      logRequests: false,
      // `listen` is workerd's own socket for the Worker, as the edge is in production. Miniflare's
      // entry worker (dev conveniences: pretty error pages, cdn-cgi routes, a `cf` blob rebuilt into
      // every request) would be a JavaScript hop on every request: ~17% of workerd's CPU per turn
      // (bench/RESULTS.md). Miniflare still needs its entry socket; it gets a free loopback port
      // nothing uses.
      host: "127.0.0.1",
      port: 0,
      unsafeDirectSockets: [{ host: listen.host, port }],
      handleStructuredLogs: ({ level, message }: { level: string; message: string }) =>
        message.startsWith("Uncaught exception") && message.endsWith(`Error: ${CUT_REASON}`)
          ? log("info", "an event stream the service cut ended at the client's next read", { source: "worker" })
          : relayLine("worker", level, message),
      // A developer's debugger for the Worker and its objects (CONTRIBUTING.md): off unless asked.
      ...(env.SVC_INSPECT_WORKER ? { inspectorPort: Number(env.SVC_INSPECT_WORKER) } : {}),
    }),
    resourcePersistencePath: path.join(dataDir, "worker"),
  });
  const before = signalListeners();
  // Signals to svc's process group stop svc, which drains and then stops workerd (workerd-session.ts).
  if (!workerdInOwnSession()) log("info", "workerd shares svc's process group: Ctrl-C stops it before the drain", { needs: "setsid, setpriv" });
  const mf = new Miniflare(options(bindingsFrom(env), listen.port));
  // Miniflare's exit hook answers SIGINT/SIGTERM with an immediate process.exit; the stack drains
  // first instead (its "exit" hook, which stops workerd if we die, stays).
  for (const [sig, fns] of signalListeners()) {
    for (const fn of fns) if (!before.get(sig)!.includes(fn)) process.off(sig, fn);
  }
  try {
    await mf.ready;
  } catch (e) {
    // A port in use, a config workerd refuses: stop what Miniflare started (its loopback server
    // would keep this process alive), so `svc` exits with its error.
    await mf.dispose().catch(() => {});
    if ((e as { code?: string }).code === "ERR_ADDRESS_IN_USE") throw new StartRefused(`listen address ${o.config.listen} is in use (Address already in use): free it or change "listen"`);
    throw e;
  }
  const url = (await mf.unsafeGetDirectURL()).href.replace(/\/$/, "");
  log("info", "local stack listening", { url, data_dir: dataDir, startup_ms: Math.round(performance.now() - t0) });

  const runner = o.runner === false ? undefined : new RunnerHost({
    baseUrl: url,
    secret,
    runnerId: persistedRunnerId(dataDir),
    config: o.config,
    // With regions configured, the in-process runner-host serves the first of them.
    region: configuredRegions(o.config)[0],
    rootDir: harnessRoot(dataDir),
    env,
    log,
  });
  runner?.start();

  // Reloads one after another; a stop waits for the one under way (its runtime is restarting, so
  // the drain's call would find no Worker to tell, and the stop would go on without the drain).
  let reloading: Promise<void> = Promise.resolve();
  return {
    url,
    reload(vars) {
      reloading = reloading.then(async () => {
        // Same port as the first start (listen may say 0), so the runner-host redials the same URL.
        await mf.setOptions(options(bindingsFrom(vars), Number(new URL(url).port)));
        log("info", "worker reloaded");
      });
      const done = reloading;
      reloading = reloading.catch(() => {});
      return done;
    },
    async stop() {
      await reloading;
      // New work is refused first (at once, not when the fleet snapshot next sees the drain); then
      // turns end as interrupted by shutdown and reach their objects before the objects go away;
      // then open event streams take those final events and end before the runtime is killed.
      await beginDrain(url, secret, runner !== undefined);
      await runner?.stop();
      await endEventStreams(url, secret);
      await mf.dispose();
      unlock();
    },
  };
}

/** Longest the drain call may take, ms: a Worker that does not answer must not hold the stop. */
const DRAIN_CALL_MS = 2_000;
/** Slack over the Worker's own bound for the end-streams call to answer, ms. */
const END_STREAMS_SLACK_MS = 2_000;

/**
 * Tells the Worker the stack is shutting down: new sessions, messages and streams get `429`. With
 * its own runner-host (`endWaiting`) the whole service stops, so sessions still waiting for room on
 * a runner-host end their queued input too; `-no-runner` stops only the Worker (like a deploy).
 */
async function beginDrain(url: string, secret: string, endWaiting: boolean): Promise<void> {
  await shutdownCall(url, `${DRAIN_PATH}${endWaiting ? "?waiting=end" : ""}`, secret, DRAIN_CALL_MS, "could not tell the worker to refuse new work");
}

/**
 * Asks the Worker to end its open event streams (each after what its object already sent) and
 * to finish the requests it is still answering, and waits until both are over. Disposing
 * Miniflare kills workerd at once: without this, frames still on their way to a client (a turn's
 * final `session.error` / `session.status`) would be lost, and a request accepted before the
 * signal (a flush in the middle of its upload round) would lose its connection unanswered.
 */
async function endEventStreams(url: string, secret: string): Promise<void> {
  log("info", "ending event streams and answering requests in flight");
  const ended = await shutdownCall(url, END_STREAMS_PATH, secret, STREAM_END_MS + END_STREAMS_SLACK_MS, "could not end event streams cleanly");
  if (ended) log("info", "event streams ended", ended as LogFields);
}

/** One step of the shutdown on the Worker's internal routes (runner secret): its answer, or undefined (logged). */
async function shutdownCall(url: string, route: string, secret: string, timeoutMs: number, failure: string): Promise<unknown> {
  try {
    const res = await fetch(`${url}${route}`, {
      method: "POST",
      headers: { Authorization: `Bearer ${secret}` },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    return await res.json();
  } catch (e) {
    log("warn", failure, { error: String(e) });
    return undefined;
  }
}

/** `svc -config <path>`: runs until SIGINT/SIGTERM, then stops cleanly. */
export async function startLocalStack(o: LocalStackOptions): Promise<number> {
  const stack = await launchLocalStack(o);
  printWelcome(o, stack.url);
  return new Promise<number>((resolve) => {
    let stopping = false;
    const onSignal = (sig: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      log("info", "stopping", { signal: sig });
      stack.stop().then(
        () => {
          log("info", "stopped");
          resolve(0);
        },
        (e) => {
          log("error", "stop failed", { error: String(e) });
          resolve(1);
        },
      );
    };
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
    // SIGHUP: re-read the env file beside the config (its values win, also over a variable svc's
    // environment set at start: logged) and restart the Worker runtime with them — how a rotated
    // provider key reaches the local stack.
    process.on("SIGHUP", () => {
      if (stopping) return;
      // Read into a copy and checked as a start checks it: an environment that would not start
      // (a token under 24 bytes, a variable gone) is refused whole, and the running one stays.
      const next = { ...process.env };
      let read: ReturnType<typeof reloadEnvFileBeside>;
      try {
        read = reloadEnvFileBeside(o.configPath, next);
      } catch (e) {
        if (!(e instanceof EnvFileError)) throw e;
        return log("error", "reload refused: the environment file cannot be read; nothing changed", { error: e.message });
      }
      const { file, replaced, apply } = read;
      const problems = checkEnvironment(o.config, next);
      if (problems.length > 0) return log("error", "reload refused: the environment would not start; nothing changed", { env_file: file ?? null, problems: problems.join("; ") });
      // Another value under a credential key's id could not decrypt one override encrypted before:
      // every session holding one would lose its credential. A new key is a new id (a restart).
      const changedKeys = Object.entries(o.config.credential_keys?.keys ?? {}).filter(([, v]) => next[v] !== process.env[v]);
      if (changedKeys.length > 0) {
        return log("error", "reload refused: a credential key changed its value; add a new key id (and make it active) instead; nothing changed", {
          env_file: file ?? null,
          keys: changedKeys.map(([id]) => id).join(", "),
        });
      }
      const secretVar = o.config.runners?.token_env;
      if (secretVar && next[secretVar] !== process.env[secretVar]) {
        log("warn", "the runner secret is read at start only: restart svc and its runner-hosts to rotate it", { variable: secretVar });
      }
      apply();
      if (replaced.length > 0) {
        log("warn", "the env file replaced variables svc's environment set at start (a start keeps those)", { env_file: file ?? null, variables: replaced.join(", ") });
      }
      log("info", "reloading", { env_file: file ?? null });
      stack.reload(process.env).catch((e) => log("error", "reload failed", { error: String(e) }));
    });
  });
}

/** Where it listens, and a curl that creates a session, without printing any secret. */
function printWelcome(o: LocalStackOptions, url: string): void {
  const token = o.config.tokens.find((t) => t.manage && !t.read_only && !t.session);
  const harness = Object.keys(o.config.harnesses)[0];
  const provider = Object.keys(o.config.providers)[0];
  const lines = [`svc: listening on ${url}`];
  if (token && harness && provider) {
    // Point at where the secret lives instead of printing it: the demo env file, or the variable.
    const envFile = o.configPath.replace(/\.json$/i, ".env");
    const inFile = existsSync(envFile) && new RegExp(`^${token.token_env}=`, "m").test(readFileSync(envFile, "utf8"));
    const secret = inFile
      ? `$(grep '^${token.token_env}=' ${path.relative(process.cwd(), envFile)} | cut -d= -f2-)`
      : `$${token.token_env}`;
    const body = JSON.stringify({ harness, config: { model: `${provider}/gpt-4o-mini`, tools: [] } });
    lines.push(
      "create a session:",
      `  curl -s -X POST ${url}/sessions -H "Authorization: Bearer ${secret}" -H 'Content-Type: application/json' -d '${body}'`,
    );
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}

const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

function signalListeners(): Map<NodeJS.Signals, NodeJS.SignalsListener[]> {
  return new Map(SIGNALS.map((s) => [s, process.listeners(s)]));
}

/** The local stack's runner secret when `runners` is not configured: generated once, kept. */
function localRunnerSecret(dataDir: string): string {
  const file = path.join(dataDir, "runner-secret");
  if (existsSync(file)) return readFileSync(file, "utf8").trim();
  const s = randomBytes(32).toString("hex");
  writeFileSync(file, `${s}\n`, { mode: 0o600 });
  return s;
}

/**
 * Node services the Worker calls: LOCAL_DISK, the room on this stack's disks that readiness needs
 * (./disk-room.ts), and persistence: `r2` gets a workerd R2 bucket bound as PERSISTENCE (kept under
 * `data_dir`, like the objects), `filesystem` the PERSISTENCE_FS service this process serves.
 * `s3` and `gcs` talk to their endpoints from the Worker itself.
 */
function serviceBindings(config: HostConfig, dataDir: string, minFree: number): Record<string, unknown> {
  const p = config.persistence;
  const fsDir = p?.provider === "filesystem" ? path.resolve(p.directory!) : undefined;
  const disk = diskRoomHandler(fsDir === undefined ? [dataDir] : [dataDir, fsDir], minFree, log);
  return {
    serviceBindings: { LOCAL_DISK: disk, ...(fsDir !== undefined ? { PERSISTENCE_FS: persistenceFsHandler(fsDir) } : {}) },
    ...(p?.provider === "r2" ? { r2Buckets: { PERSISTENCE: p.bucket! } } : {}),
  };
}
