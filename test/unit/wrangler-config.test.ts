/**
 * wrangler.toml is what `wrangler deploy` ships; runner-host/cli/worker-bundle.ts is what the local
 * stack runs. They must describe the same Worker: compatibility date and flags, Durable Object
 * bindings and classes. The production settings the deploy runbook relies on are checked too, and
 * the generated `Env` types (worker-configuration.d.ts) must match the bindings.
 */
import { execFileSync, spawnSync } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { unstable_readConfig } from "wrangler";
import { ROOT, WRANGLER_TOML, wranglerCommand } from "../../runner-host/cli/deploy/deploy-command.ts";
import { COMPATIBILITY_DATE, COMPATIBILITY_FLAGS } from "../../runner-host/cli/worker-bundle.ts";
import { DURABLE_OBJECTS, WORKER_BINDINGS } from "../../src/shared/worker-bindings.ts";

/** The fields read here (wrangler's own config type does not resolve under nodenext). */
type WranglerConfig = {
  name: string;
  compatibility_date: string;
  compatibility_flags: string[];
  durable_objects: { bindings: { name: string; class_name: string }[] };
  migrations: { new_sqlite_classes?: string[] }[];
  r2_buckets: { binding: string }[];
  observability?: { enabled?: boolean };
  limits?: { cpu_ms?: number };
};
const config = unstable_readConfig({ config: WRANGLER_TOML }) as unknown as WranglerConfig;

describe("wrangler.toml and the local stack describe the same Worker", () => {
  it("has the compatibility date and flags of worker-bundle.ts", () => {
    expect(config.compatibility_date).toBe(COMPATIBILITY_DATE);
    expect([...config.compatibility_flags].sort()).toEqual([...COMPATIBILITY_FLAGS].sort());
  });

  it("binds the same Durable Objects, each class created as SQLite-backed by a migration", () => {
    const bindings = Object.fromEntries(config.durable_objects.bindings.map((b) => [b.name, b.class_name]));
    expect(bindings).toEqual(DURABLE_OBJECTS);
    const sqlite = config.migrations.flatMap((m) => m.new_sqlite_classes ?? []);
    expect(sqlite.sort()).toEqual(Object.values(DURABLE_OBJECTS).sort());
  });

  it("the names a configuration may not give its variables are the Worker's bindings: wrangler.toml's and the local stack's own", () => {
    const wrangler = [...config.durable_objects.bindings.map((b) => b.name), ...config.r2_buckets.map((b) => b.binding)];
    expect([...WORKER_BINDINGS].sort()).toEqual([...wrangler, "HOST_CONFIG", "PERSISTENCE_FS", "LOCAL_DISK"].sort());
  });
});

describe("wrangler.toml for production", () => {
  it("names the Worker something that will not clobber another", () => {
    expect(config.name).toBe("agent-session-service");
  });

  it("binds the R2 bucket as PERSISTENCE, sends logs to Workers Logs, and raises the CPU limit", () => {
    expect(config.r2_buckets.map((b) => b.binding)).toEqual(["PERSISTENCE"]);
    expect(config.observability?.enabled).toBe(true);
    expect(config.limits?.cpu_ms).toBe(300_000);
  });

  it("keeps local Worker secrets out of git", () => {
    for (const file of [".dev.vars", ".dev.vars.production", "prod.secrets.json"]) {
      expect(execFileSync("git", ["check-ignore", file], { cwd: ROOT, encoding: "utf8" }).trim()).toBe(file);
    }
  });

  it("worker-configuration.d.ts is what `wrangler types` generates from it", () => {
    const [cmd, args] = wranglerCommand(["types", "--check", "--include-runtime=false", path.join(ROOT, "worker-configuration.d.ts")]);
    const r = spawnSync(cmd, args, { cwd: ROOT, encoding: "utf8", env: { ...process.env, WRANGLER_SEND_METRICS: "false" } });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
  });
});
