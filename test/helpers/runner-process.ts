/**
 * `svc runner` as its own process with a runner configuration file: what a runner-host VM runs.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { spawnLogged, type Logged } from "./process.ts";
import { REFERENCE_HARNESSES, ROOT } from "./stack.ts";

export type RunnerProcess = Logged & { dir: string; configPath: string };

/** The reference harness, by absolute path (runner-hosts may run anywhere). */
export const REFERENCE_HARNESS = REFERENCE_HARNESSES;

export async function startRunner(o: { dir: string; config: Record<string, unknown>; env: Record<string, string>; connected?: boolean }): Promise<RunnerProcess> {
  mkdirSync(o.dir, { recursive: true });
  const configPath = path.join(o.dir, "runner.json");
  writeFileSync(configPath, JSON.stringify({ data_dir: path.join(o.dir, "data"), harnesses: REFERENCE_HARNESS, ...o.config }));
  const p = spawnLogged(process.execPath, [path.join(ROOT, "cli/svc.mjs"), "runner", "-config", configPath], {
    cwd: o.dir,
    env: { PATH: process.env.PATH ?? "", HOME: o.dir, ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}), ...o.env },
  });
  if (o.connected !== false) await p.waitFor(/"msg":"runner-host connected"/);
  return { ...p, dir: o.dir, configPath };
}
