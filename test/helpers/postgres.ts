/**
 * A throwaway PostgreSQL from Debian's package for tests: installed when missing (CI runs as
 * root), a fresh cluster in a temporary directory on a free loopback port, stopped with pg_ctl.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { ensureDebianPackage } from "./debian.ts";

export type Postgres = { url: string; stop(): void };

function binDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const version = readdirSync(root).sort().at(-1);
  return version ? path.join(root, version, "bin") : undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function startPostgres(): Promise<Postgres> {
  ensureDebianPackage("postgresql", () => binDir() !== undefined);
  const bin = binDir()!;
  const dir = mkdtempSync(path.join(tmpdir(), "svc-pg-"));
  const asPostgres = process.getuid?.() === 0;
  if (asPostgres) chownSync(dir, Number(execFileSync("id", ["-u", "postgres"]).toString()), Number(execFileSync("id", ["-g", "postgres"]).toString()));
  const run = (cmd: string, args: string[]) => {
    const r = asPostgres ? spawnSync("runuser", ["-u", "postgres", "--", cmd, ...args]) : spawnSync(cmd, args);
    if (r.status !== 0) throw new Error(`${path.basename(cmd)} failed: ${r.stderr?.toString()}`);
  };
  const data = path.join(dir, "data");
  run(path.join(bin, "initdb"), ["-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"]);
  const port = await freePort();
  run(path.join(bin, "pg_ctl"), ["-D", data, "-l", path.join(dir, "pg.log"), "-w", "-o", `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c fsync=off`, "start"]);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop: () => run(path.join(bin!, "pg_ctl"), ["-D", data, "-m", "fast", "-w", "stop"]),
  };
}
