/**
 * Start-up time of `npx svc -config examples/local.json` to the first `200` from `/health/live`
 * (median of 5 cold starts of the whole command, npx included), beside `node -e ""` as the floor.
 *
 *   node bench/startup.ts [--runs 5]
 */
import { spawn } from "node:child_process";
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { runs: { type: "string", default: "5" } } });
const RUNS = Number(values.runs);
const URL_LIVE = "http://127.0.0.1:8080/health/live";
/** Poll interval while waiting for the port, ms: fine-grained next to a ~1 s start. */
const POLL_MS = 10;

async function once(cmd: string, args: string[], waitLive: boolean): Promise<number> {
  const t0 = performance.now();
  // Its own process group: npx runs svc as a child, and the whole group is stopped after.
  const child = spawn(cmd, args, { stdio: "ignore", detached: true });
  const exited = new Promise((r) => child.once("exit", r));
  if (!waitLive) {
    await exited;
    return performance.now() - t0;
  }
  for (;;) {
    const ok = await fetch(URL_LIVE).then((r) => r.status === 200, () => false);
    if (ok) break;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  const ms = performance.now() - t0;
  process.kill(-child.pid!, "SIGTERM");
  await exited;
  // The port is free again once the group is gone: wait for that before the next start.
  while (await fetch(URL_LIVE).then(() => true, () => false)) await new Promise((r) => setTimeout(r, POLL_MS));
  return ms;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const svc: number[] = [];
const node: number[] = [];
for (let i = 0; i < RUNS; i++) {
  svc.push(await once("npx", ["svc", "-config", "examples/local.json"], true));
  node.push(await once(process.execPath, ["-e", ""], false));
}
console.log(`| command | median of ${RUNS} (ms) | runs (ms) |\n| --- | --- | --- |`);
console.log(`| npx svc -config examples/local.json → /health/live 200 | ${Math.round(median(svc))} | ${svc.map(Math.round).join(", ")} |`);
console.log(`| node -e "" (floor) | ${Math.round(median(node))} | ${node.map(Math.round).join(", ")} |`);
