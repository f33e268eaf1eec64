/**
 * Reads the host configuration file for the `svc` command (docs/configuration.md):
 * at most 4 MiB, UTF-8 JSON, parsed by the shared schema, then its environment variables checked.
 * Relative paths (the file's own and `data_dir`) resolve from the process working directory.
 */
import { closeSync, constants, existsSync, fstatSync, openSync, readFileSync } from "node:fs";
import { open } from "node:fs/promises";
import path, { resolve } from "node:path";
import { parseEnv } from "node:util";
import { checkEnvironment } from "../../src/shared/config-env.ts";
import { MAX_CONFIG_BYTES, parseHostConfigText, type HostConfig } from "../../src/shared/config-schema.ts";

/**
 * Opens for reading without waiting for a writer: a FIFO at the path would otherwise block the open
 * until someone writes to it (`-check` hung); it opens at once and is refused as not a regular file.
 */
const READ_NOT_WAITING = constants.O_RDONLY | constants.O_NONBLOCK;

/** Problems do not repeat the file's path: the caller names the file once (the CLI prefixes it). */
export type LoadResult = { ok: true; config: HostConfig; path: string } | { ok: false; problems: string[] };

export async function loadConfigFile(path: string, env: Record<string, string | undefined> = process.env): Promise<LoadResult> {
  const read = await readConfigFile(path);
  if (!read.ok) return read;
  const problems = checkEnvironment(read.config, env);
  return problems.length > 0 ? { ok: false, problems } : { ok: true, config: read.config, path: read.path };
}

/** The file checked against the schema only, with its exact text (what `svc deploy` bundles). */
export async function readConfigFile(path: string): Promise<{ ok: true; config: HostConfig; path: string; text: string } | { ok: false; problems: string[] }> {
  const read = await readTextFile(path);
  if (!read.ok) return read;
  const parsed = parseHostConfigText(read.text);
  return parsed.ok ? { ok: true, config: parsed.config, path: read.path, text: read.text } : parsed;
}

/** A configuration file's text: at most 4 MiB, UTF-8. Shared by the host and the runner config. */
export async function readTextFile(path: string): Promise<{ ok: true; path: string; text: string } | { ok: false; problems: string[] }> {
  const absolute = resolve(process.cwd(), path);
  const read = await readBounded(absolute);
  if (typeof read === "string") return { ok: false, problems: [read] };
  try {
    return { ok: true, path: absolute, text: new TextDecoder("utf-8", { fatal: true }).decode(read) };
  } catch {
    return { ok: false, problems: ["the file is not valid UTF-8"] };
  }
}

/**
 * The file's bytes, or a problem. Reads at most one byte past the cap, so neither a huge file nor
 * one that grows between the size check and the read is ever held in memory whole.
 */
async function readBounded(path: string): Promise<Uint8Array | string> {
  let file;
  try {
    file = await open(path, READ_NOT_WAITING);
  } catch (e) {
    return describeFsError(e);
  }
  try {
    const stat = await file.stat();
    if (!stat.isFile()) return "not a regular file";
    if (stat.size > MAX_CONFIG_BYTES) return TOO_LARGE;
    const buf = new Uint8Array(MAX_CONFIG_BYTES + 1);
    let length = 0;
    while (length < buf.length) {
      const { bytesRead } = await file.read(buf, length, buf.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    return length > MAX_CONFIG_BYTES ? TOO_LARGE : buf.subarray(0, length);
  } catch (e) {
    return describeFsError(e);
  } finally {
    await file.close();
  }
}

const TOO_LARGE = `the configuration is larger than ${MAX_CONFIG_BYTES} bytes (4 MiB)`;

function describeFsError(e: unknown): string {
  const code = (e as { code?: string }).code;
  if (code === "ENOENT") return "no such file";
  if (code === "EACCES" || code === "EPERM") return "permission denied";
  if (code === "EISDIR") return "not a regular file";
  return e instanceof Error ? e.message : String(e);
}

/** `data_dir` as an absolute path; relative values resolve from the working directory. */
export function resolveDataDir(config: { data_dir: string }, cwd: string = process.cwd()): string {
  return resolve(cwd, config.data_dir);
}

/** An env file that exists but cannot be read (a directory, no permission); the message names it and why. */
export class EnvFileError extends Error {}

function readEnvFile(file: string): ReturnType<typeof parseEnv> {
  let text: string;
  let fd: number | undefined;
  try {
    fd = openSync(file, READ_NOT_WAITING);
    if (!fstatSync(fd).isFile()) throw new EnvFileError(`${file}: the environment file cannot be read (not a regular file)`);
    text = readFileSync(fd, "utf8");
  } catch (e) {
    if (e instanceof EnvFileError) throw e;
    throw new EnvFileError(`${file}: the environment file cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  // A byte-order mark (an editor's "UTF-8 with BOM") would otherwise start the first variable's name.
  return parseEnv(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
}

/**
 * Loads `<name>.env` beside `<name>.json` when it exists (the local demo keeps its fake secrets
 * there), without overriding variables the environment already sets. Returns its path if loaded;
 * throws EnvFileError when it exists but cannot be read.
 */
export function loadEnvFileBeside(configPath: string, env: NodeJS.ProcessEnv = process.env, override = false): string | undefined {
  const file = envFileBeside(configPath);
  if (!file) return undefined;
  for (const [k, v] of Object.entries(readEnvFile(file))) {
    if (!override && env[k] !== undefined) continue;
    env[k] = v;
    if (env === process.env) fromFile.add(k);
  }
  return file;
}

/** `loadEnvFileBeside` at a command's start: the file it loaded (if any), or the problem to report and exit on. */
export function loadEnvFileChecked(configPath: string): { ok: true; file?: string } | { ok: false; problem: string } {
  try {
    return { ok: true, file: loadEnvFileBeside(configPath) };
  } catch (e) {
    if (e instanceof EnvFileError) return { ok: false, problem: e.message };
    throw e;
  }
}

/** Variables the process took from its env file (not those its environment set first). */
const fromFile = new Set<string>();

function envFileBeside(configPath: string): string | undefined {
  const file = path.resolve(configPath).replace(/\.json$/i, "") + ".env";
  return file === path.resolve(configPath) || !existsSync(file) ? undefined : file;
}

/**
 * SIGHUP, into `next` (a copy of the process environment): the env file's values replace what
 * the process had (a rotated key, say), also a variable svc's own environment set at start, which
 * the start left alone (the file is what an operator edits before a SIGHUP); those are named in
 * `replaced` (when the value differs) so the caller can say so. A variable the process took from
 * the file that the file no longer sets is removed (a retired token stops working; a named one
 * missing is refused by the caller's check). `apply` then makes `next` the process environment.
 * Throws EnvFileError when the file exists but cannot be read.
 */
export function reloadEnvFileBeside(configPath: string, next: NodeJS.ProcessEnv): { file?: string; replaced: string[]; apply(): void } {
  const file = envFileBeside(configPath);
  const values = file ? readEnvFile(file) : {};
  for (const k of fromFile) if (!Object.hasOwn(values, k)) delete next[k];
  const replaced = Object.keys(values).filter((k) => !fromFile.has(k) && next[k] !== undefined && next[k] !== values[k]);
  Object.assign(next, values);
  return {
    file,
    replaced,
    apply() {
      for (const k of Object.keys(process.env)) if (!Object.hasOwn(next, k)) delete process.env[k];
      Object.assign(process.env, next);
      fromFile.clear();
      for (const k of Object.keys(values)) fromFile.add(k);
    },
  };
}
