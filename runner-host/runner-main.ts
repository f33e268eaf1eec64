/**
 * `svc runner -config <path>`: a runner-host on its own, dialling the configured service
 * (`public_url`) with the secret named by `runners.token_env`. Runs until SIGINT/SIGTERM, then
 * drains (spec "Operational behaviour": exit within about 20 seconds).
 */
import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import type { HostConfig } from "../src/shared/config-schema.ts";
import { resolveDataDir } from "./config-file.ts";
import { log } from "./log.ts";
import { RunnerHost } from "./runner-host.ts";
import { persistedRunnerId } from "./runner-id.ts";
import { insecureSecretTarget } from "./socket.ts";

/** Hard deadline for the drain after a signal, ms: the spec's "about 20 seconds", with margin. */
const EXIT_DEADLINE_MS = 18_000;

export async function runRunnerHost(o: { config: HostConfig; configPath: string }): Promise<number> {
  const { config } = o;
  if (!config.runners) {
    log("error", "svc runner needs runners.token_env in the configuration (the secret shared with the service)");
    return 1;
  }
  const secret = process.env[config.runners.token_env];
  if (!secret) {
    log("error", "the runner secret variable is not set", { variable: config.runners.token_env });
    return 1;
  }
  const insecure = insecureSecretTarget(config.public_url);
  if (insecure) {
    log("error", "svc runner refuses public_url", { public_url: config.public_url, reason: insecure });
    return 1;
  }
  const dataDir = resolveDataDir(config);
  mkdirSync(dataDir, { recursive: true });
  const rootDir = harnessRoot(dataDir);

  const host = new RunnerHost({ baseUrl: config.public_url, secret, runnerId: persistedRunnerId(dataDir), config, rootDir });
  host.start();
  log("info", "runner-host started", { url: config.public_url, boot: host.boot, harnesses: Object.keys(config.harnesses).join(",") });

  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  log("info", "stopping", { signal });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), EXIT_DEADLINE_MS)));
  const outcome = await Promise.race([host.stop().then(() => "ok" as const, () => "failed" as const), deadline]);
  clearTimeout(timer);
  if (outcome !== "ok") log("error", "runner-host did not stop cleanly", { outcome });
  else log("info", "stopped");
  return outcome === "ok" ? 0 : 1;
}

/**
 * Where harness processes get their private directories. Emptied at start: whatever a previous
 * run left (it was killed before cleaning up) belongs to processes that no longer exist.
 */
export function harnessRoot(dataDir: string): string {
  const dir = path.join(dataDir, "harness");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}
