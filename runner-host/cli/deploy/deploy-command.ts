/**
 * `svc deploy -config <path>`: checks the host configuration exactly as `svc -config <path> -check`
 * does, builds it into the Worker bundle, and runs `wrangler deploy` with wrangler.toml.
 *
 * The configuration travels as a generated entry module (deploy-entry.mjs in a temporary
 * directory) that installs the file's text and re-exports src/index.ts, so it can be as large as
 * a configuration may be (4 MiB) while a Workers variable holds 5 KB. The named variables are uploaded
 * with the same version (`--secrets-file`, a temporary 0600 file deleted afterwards) unless
 * `-remote-secrets` says they are Worker secrets already. Exit codes: 0 ok, 1 a problem, 2 usage.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import type { BundledConfig } from "../../../src/bundled-config.ts";
import { R2_BINDING } from "../../../src/persistence/open-store.ts";
import type { HostConfig } from "../../../src/shared/config-schema.ts";
import { loadEnvFileChecked, readConfigFile } from "../config-file.ts";
import { parseFlags } from "./flags.ts";
import { planSecrets, secretValues, variablesBudget } from "./worker-secrets.ts";

export const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
export const WRANGLER_TOML = path.join(ROOT, "wrangler.toml");

/**
 * Worker size limit, bytes: 64 MiB uncompressed on every plan since 2026. Accounts still under the
 * older rule are capped after compression instead (10 MB Paid, 3 MB Free), so both figures print.
 */
export const WORKER_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;
export const WORKER_GZIP_LIMIT_BYTES = 10 * 1000 * 1000;

export const DEPLOY_USAGE = `usage: svc deploy -config <path> [-dry-run] [-outdir <dir>] [-token-digests] [-remote-secrets] [-- <wrangler deploy flags>]

  Checks the host configuration (as -check does), builds it into the Worker bundle and runs
  \`wrangler deploy\` with wrangler.toml. The variables it names are read from this environment
  (and the .env file beside the config) and uploaded as Worker secrets with the same version.

flags:
  -config <path>    host configuration file (at most 4 MiB)
  -dry-run          build and check only (\`wrangler deploy --dry-run\`), upload nothing
  -outdir <dir>     keep the built bundle there
  -token-digests    bundle the SHA-256 of each tenant token instead of one Worker secret per token
  -remote-secrets   the variables are Worker secrets already: check the file only, upload none
                    (GET /internal/status of the deployed Worker names any that is missing)
`;

export async function deployMain(argv: readonly string[]): Promise<number> {
  const parsed = parseFlags(argv, { config: "string", "dry-run": "boolean", outdir: "string", "token-digests": "boolean", "remote-secrets": "boolean" });
  if (!parsed.ok) return usage(parsed);
  const f = parsed.flags;
  const configArg = f.config as string | undefined;
  if (!configArg) return usage({ help: false, problem: "-config <path> is required" });
  const tokenDigests = f["token-digests"] === true;
  const remote = f["remote-secrets"] === true;

  const env = loadEnvFileChecked(configArg);
  if (!env.ok) return fail(configArg, [env.problem]);
  const read = await readConfigFile(configArg);
  const problems = read.ok ? deployProblems(read.config, await boundBucket()) : read.problems;
  if (!read.ok || problems.length > 0) return fail(configArg, problems);
  const plan = planSecrets(read.config, process.env, { tokenDigests });
  // With remote secrets only the tokens to digest must be here; otherwise everything, as -check.
  const envProblems = remote ? plan.problems.filter((p) => /^tokens\[/.test(p) && tokenDigests) : plan.problems;
  if (envProblems.length > 0) return fail(configArg, envProblems);
  const budget = variablesBudget(plan.names.length);
  process.stderr.write(`svc: ${budget.line}\n`);
  if (!budget.ok) return 1;

  const work = mkdtempSync(path.join(tmpdir(), "svc-deploy-"));
  try {
    const entry = writeDeployEntry(work, { text: read.text, tokenDigests: plan.tokenDigests });
    const outdir = typeof f.outdir === "string" ? path.resolve(f.outdir) : path.join(work, "dist");
    const args = ["deploy", entry, "--config", WRANGLER_TOML, "--outdir", outdir];
    if (f["dry-run"] === true) args.push("--dry-run");
    else if (!remote && plan.names.length > 0) {
      const secretsFile = path.join(work, "secrets.json");
      writeFileSync(secretsFile, JSON.stringify(secretValues(plan.names, process.env)), { mode: 0o600 });
      args.push("--secrets-file", secretsFile);
    }
    const code = await runWrangler([...args, ...parsed.rest]);
    if (code !== 0) {
      process.stderr.write(`svc: not deployed (wrangler deploy exited ${code}; its own message is above)\n`);
      return code;
    }
    process.stdout.write(`${bundleSizeLine(outdir)}\n`);
    return 0;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * What a deployed Worker cannot work with, though the local stack can. `bucket`: the bucket
 * wrangler.toml binds as PERSISTENCE, if any. The binding decides where `r2` uploads go while
 * `persistence.bucket` is what each session records of them, so the two must name one bucket.
 */
export function deployProblems(config: HostConfig, bucket: string | undefined): string[] {
  const out: string[] = [];
  if (!config.runners) out.push("runners: required for a deployment (runner-hosts dial in with the secret runners.token_env names)");
  const p = config.persistence;
  if (p?.provider === "filesystem") out.push("persistence.provider: filesystem exists only in the local stack; use r2, s3 or gcs");
  if (p?.provider === "r2" && bucket !== undefined && p.bucket !== bucket) {
    out.push(`persistence.bucket: "${p.bucket}", but wrangler.toml binds PERSISTENCE to bucket "${bucket}"; give both the same name`);
  }
  return out;
}

/** The `bucket_name` wrangler.toml gives the PERSISTENCE binding, read as wrangler reads it. */
async function boundBucket(): Promise<string | undefined> {
  const { unstable_readConfig } = await import("wrangler");
  const toml = unstable_readConfig({ config: WRANGLER_TOML }) as unknown as { r2_buckets?: { binding: string; bucket_name?: string }[] };
  return toml.r2_buckets?.find((b) => b.binding === R2_BINDING)?.bucket_name;
}

/** Writes the entry module that builds `b` into the bundle; returns its path. */
export function writeDeployEntry(dir: string, b: BundledConfig): string {
  const src = (file: string) => JSON.stringify(path.join(ROOT, "src", file));
  const file = path.join(dir, "deploy-entry.mjs");
  writeFileSync(
    file,
    [
      "// Generated by `svc deploy`: the host configuration, built into the Worker bundle.",
      `import { installBundledConfig } from ${src("bundled-config.ts")};`,
      `installBundledConfig(${JSON.stringify(b)});`,
      `export * from ${src("index.ts")};`,
      `export { default } from ${src("index.ts")};`,
      "",
    ].join("\n"),
  );
  return file;
}

/** The wrangler of this repository's lockfile, run on this Node. */
export function wranglerCommand(args: readonly string[]): [string, string[]] {
  const pkg = createRequire(import.meta.url).resolve("wrangler/package.json");
  return [process.execPath, [path.join(path.dirname(pkg), "bin", "wrangler.js"), ...args]];
}

function runWrangler(args: readonly string[]): Promise<number> {
  const [cmd, argv] = wranglerCommand(args);
  const child = spawn(cmd, argv, { cwd: ROOT, stdio: "inherit", env: { ...process.env, WRANGLER_SEND_METRICS: "false" } });
  return new Promise((resolve) => {
    child.once("error", () => resolve(1));
    child.once("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

/** The built Worker's size (its modules, not source maps) against the platform limits. */
export function bundleSizeLine(outdir: string): string {
  let raw = 0;
  let gzip = 0;
  for (const name of readdirSync(outdir)) {
    const file = path.join(outdir, name);
    if (name.endsWith(".map") || name === "README.md" || !statSync(file).isFile()) continue;
    const bytes = readFileSync(file);
    raw += bytes.length;
    gzip += gzipSync(bytes).length;
  }
  const mib = (n: number) => `${(n / 1024 / 1024).toFixed(2)} MiB`;
  const pct = (n: number, of: number) => `${((100 * n) / of).toFixed(1)} %`;
  return (
    `bundle: ${mib(raw)} of the ${mib(WORKER_SIZE_LIMIT_BYTES)} Worker size limit (${pct(raw, WORKER_SIZE_LIMIT_BYTES)}); ` +
    `gzip ${mib(gzip)}, ${pct(gzip, WORKER_GZIP_LIMIT_BYTES)} of the older 10 MB compressed limit`
  );
}

function fail(configArg: string, problems: readonly string[]): number {
  for (const p of problems) process.stderr.write(`${configArg}: ${p}\n`);
  process.stderr.write("svc: not deployed\n");
  return 1;
}

function usage(p: { help: boolean; problem?: string }): number {
  if (p.help) {
    process.stdout.write(DEPLOY_USAGE);
    return 0;
  }
  process.stderr.write(`svc deploy: ${p.problem}\n${DEPLOY_USAGE}`);
  return 2;
}
