#!/usr/bin/env node
import { oldNodeProblem } from "./node-version.mjs";

const problem = oldNodeProblem(process.versions.node);
if (problem !== null) {
  // The same JSON line as svc's other start refusals (runner-host/log.ts), written here by hand
  // because that module is TypeScript.
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level: "error", msg: `svc: could not start: ${problem}` })}\n`);
  process.exit(1);
}
const { main } = await import("../runner-host/cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
