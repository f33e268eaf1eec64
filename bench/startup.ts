/**
 * Start-up time of `npx svc -config <the demo config>` to the first `200` from `/health/live`
 * (median of 5 cold starts of the whole command, npx included), beside `node -e ""` as the floor.
 * The demo config (examples/local.json and its env file) is copied to a temporary directory with a
 * free port, so the bench never times another stack listening on :8080; its data_dir is
 * `.svc/bench-startup` in the working directory, kept across the runs like the demo's own.
 *
 *   npm run bench:startup [-- --runs 5 | -- --short]
 */
import { spawn } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchArgs } from "./args.ts";

const { runs: RUNS } = benchArgs({ runs: 5 }, { runs: 1 });
/** Poll interval while waiting for the port, ms: fine-grained next to a ~1 s start. */
const POLL_MS = 10;
/** A start slower than this is a failure, not a figure, ms. */
const START_DEADLINE_MS = 60_000;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

const dir = mkdtempSync(join(tmpdir(), "svc-bench-startup-"));
const port = await freePort();
const CONFIG = join(dir, "local.json");
const demo = JSON.parse(readFileSync("examples/local.json", "utf8")) as Record<string, unknown>;
writeFileSync(CONFIG, JSON.stringify({ ...demo, listen: `127.0.0.1:${port}`, public_url: `http://127.0.0.1:${port}`, data_dir: ".svc/bench-startup" }));
copyFileSync("examples/local.env", join(dir, "local.env"));
const URL_LIVE = `http://127.0.0.1:${port}/health/live`;

async function once(cmd: string, args: string[], waitLive: boolean): Promise<number> {
  const t0 = performance.now();
  // Its own process group: npx runs svc as a child, and the whole group is stopped after.
  const child = spawn(cmd, args, { stdio: ["ignore", "ignore", "pipe"], detached: true });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-4000)));
  let gone = false;
  const exited = new Promise((r) => child.once("exit", () => r((gone = true))));
  if (!waitLive) {
    await exited;
    return performance.now() - t0;
  }
  for (;;) {
    const ok = await fetch(URL_LIVE).then((r) => r.status === 200, () => false);
    if (ok) break;
    if (gone) throw new Error(`${cmd} exited before /health/live answered; stderr:\n${stderr}`);
    if (performance.now() - t0 > START_DEADLINE_MS) {
      process.kill(-child.pid!, "SIGKILL");
      throw new Error(`svc did not answer /health/live within ${START_DEADLINE_MS} ms; stderr:\n${stderr}`);
    }
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
try {
  for (let i = 0; i < RUNS; i++) {
    svc.push(await once("npx", ["svc", "-config", CONFIG], true));
    node.push(await once(process.execPath, ["-e", ""], false));
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`| command | median of ${RUNS} (ms) | runs (ms) |\n| --- | --- | --- |`);
console.log(`| npx svc -config <demo config> → /health/live 200 | ${Math.round(median(svc))} | ${svc.map(Math.round).join(", ")} |`);
console.log(`| node -e "" (floor) | ${Math.round(median(node))} | ${node.map(Math.round).join(", ")} |`);
