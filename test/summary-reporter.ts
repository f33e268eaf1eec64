import type { Reporter, TestModule } from "vitest/node";

/**
 * Prints the run's totals as one plain line (`N passed, N failed`) after vitest's own report, so
 * CI reads the outcome whatever it knows of vitest, and fails a run that executed no test at all.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, errors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const m of modules) {
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === "passed") passed += 1;
        else if (state === "failed") failed += 1;
        else skipped += 1;
      }
      if (m.state() === "failed" && [...m.children.allTests()].length === 0) failed += 1;
    }
    failed += errors.length;
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}\n`);
    if (passed + failed === 0) {
      process.stdout.write("no test ran\n");
      process.exitCode = 1;
    }
  }
}
