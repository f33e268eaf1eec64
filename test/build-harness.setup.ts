/**
 * Global setup of the projects that start the reference harness (unit, fuzz, e2e): builds it from
 * the current sources, so no test runs an older build (scripts/build-harness.ts rewrites only the
 * files whose bytes differ, so projects starting together leave the same files in place).
 *
 * It also gives the whole run one temporary directory, removed at its end: TMPDIR points there, so
 * the stacks, data_dirs, harness roots and profiles that tests and the processes they start make
 * with `tmpdir()` go with it — test processes can end without running exit handlers, and a run
 * left about 500 directories in /tmp. Vitest sets up every project before the first test and tears
 * them down in reverse, so the first project's setup makes the directory and its teardown, the
 * last, removes it. Mode 0711: a root runner-host's harness users reach their own private
 * directories inside it (runner-host/harness/harness-process.ts) but cannot list it.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildHarness } from "../scripts/build-harness.ts";

export async function setup(): Promise<(() => void) | undefined> {
  await buildHarness();
  if (process.env.SVC_TEST_RUN_DIR) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "svc-test-run-"));
  chmodSync(dir, 0o711);
  const harnessRoots = join(dir, "harness-roots");
  mkdirSync(harnessRoots, { mode: 0o700 });
  process.env.SVC_TEST_RUN_DIR = dir;
  process.env.SVC_TEST_HARNESS_ROOTS = harnessRoots;
  process.env.TMPDIR = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}
