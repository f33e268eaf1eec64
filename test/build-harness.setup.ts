/**
 * Global setup of the projects that start the reference harness (unit, fuzz, e2e): builds it from
 * the current sources, so no test runs an older build (scripts/build-harness.ts rewrites only the
 * files whose bytes differ, so projects starting together leave the same files in place).
 */
import { buildHarness } from "../scripts/build-harness.ts";

export async function setup(): Promise<void> {
  await buildHarness();
}
