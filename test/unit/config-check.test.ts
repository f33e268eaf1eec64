import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "svc-check-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ENV = { SVC_TOKEN: "check-token-0123456789abcdef", OPENAI_KEY: "sk-test" };

function writeConfig(name: string, over: Record<string, unknown> = {}): string {
  const path = join(dir, name);
  const config = {
    data_dir: join(dir, `${name}.data`),
    tokens: [{ token_env: "SVC_TOKEN", tenant: "acme", manage: true }],
    harnesses: { pi: { command: ["node", "harness.ts"] } },
    providers: { openai: { api_key_env: "OPENAI_KEY" } },
    ...over,
  };
  writeFileSync(path, JSON.stringify(config, null, 2));
  return path;
}

/** Runs the real `svc` command with only the given environment and waits for it to exit by itself. */
function svc(args: string[], env: Record<string, string> = ENV): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, "cli/svc.mjs"), ...args], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d));
    child.stderr.on("data", (d: Buffer) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("svc -check validates the file and all referenced environment variables without starting", () => {
  it("exits 0 and reports the file for a valid configuration, starting nothing", async () => {
    const path = writeConfig("valid.json");
    const r = await svc(["-config", path, "-check"]);
    expect(r).toEqual({ code: 0, stdout: `config ok: ${path}\n`, stderr: "" });
    expect(existsSync(join(dir, "valid.json.data"))).toBe(false);
  });
  it("accepts -config=<path>, --config and the runner subcommand", async () => {
    const path = writeConfig("forms.json");
    expect((await svc([`-config=${path}`, "-check"])).code).toBe(0);
    expect((await svc(["--config", path, "--check"])).code).toBe(0);
    // A runner-host checks only what it reads: the runner secret, not tenant tokens or provider keys.
    const runnerPath = writeConfig("forms-runner.json", { runners: { token_env: "RUNNER_SECRET" } });
    expect((await svc(["runner", "-config", runnerPath, "-check"], { RUNNER_SECRET: "runner-secret-0123456789abcdef" })).code).toBe(0);
  });
  it("resolves a relative -config path from the working directory", async () => {
    const r = await svc(["-config", "examples/local.json", "-check"], envFile(join(root, "examples/local.env")));
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 0, stdout: `config ok: ${join(root, "examples/local.json")}\n` });
  });
  it("loads the demo environment file beside the config, without overriding set variables", async () => {
    const r = await svc(["-config", "examples/local.json", "-check"], {});
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stderr.trim())).toMatchObject({ msg: "environment file loaded", path: join(root, "examples/local.env") });
    const bad = await svc(["-config", "examples/local.json", "-check"], { SVC_DEMO_TOKEN: "short" });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("SVC_DEMO_TOKEN");
    expect(bad.stderr).not.toContain("short");
  });
  it("an env file beside the config that cannot be read is named, at -check and at a start, not a stack trace; one with a BOM loads", async () => {
    const path = writeConfig("env-dir.json");
    mkdirSync(join(dir, "env-dir.env"));
    const check = await svc(["-config", path, "-check"], {});
    expect(check).toEqual({ code: 1, stdout: "", stderr: `${join(dir, "env-dir.env")}: the environment file cannot be read (not a regular file)\n` });
    for (const args of [["-config", path], ["runner", "-config", path]]) {
      const start = await svc(args, {});
      expect(start.code).toBe(1);
      expect(JSON.parse(start.stderr.trim())).toMatchObject({ level: "error", msg: `svc: could not start: ${join(dir, "env-dir.env")}: the environment file cannot be read (not a regular file)` });
    }
    // A FIFO with no writer: the open does not wait for one.
    const fifo = writeConfig("env-fifo.json");
    execFileSync("mkfifo", [join(dir, "env-fifo.env")]);
    expect(await svc(["-config", fifo, "-check"], {})).toEqual({ code: 1, stdout: "", stderr: `${join(dir, "env-fifo.env")}: the environment file cannot be read (not a regular file)\n` });
    const bom = writeConfig("env-bom.json");
    writeFileSync(join(dir, "env-bom.env"), `\ufeffSVC_TOKEN=${ENV.SVC_TOKEN}\nOPENAI_KEY=${ENV.OPENAI_KEY}\n`);
    expect((await svc(["-config", bom, "-check"], {})).code).toBe(0);
  });
  it("exits 1 and names the field for an invalid field", async () => {
    const path = writeConfig("bad-field.json", { limits: { queue: 0 }, extra: true });
    const r = await svc(["-config", path, "-check"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr.trimEnd().split("\n")).toEqual([`${path}: limits.queue: must be between 1 and 1024`, `${path}: extra: unknown field`]);
  });
  it("a start that refuses the file logs the same problems as JSON lines, like its other start failures", async () => {
    const path = writeConfig("bad-field-start.json", { limits: { queue: 0 }, extra: true });
    for (const args of [["-config", path], ["runner", "-config", path]]) {
      const r = await svc(args);
      expect(r).toMatchObject({ code: 1, stdout: "" });
      const lines = r.stderr.trimEnd().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.map((l) => [l.level, l.msg])).toEqual([
        ["error", `svc: could not start: ${path}: limits.queue: must be between 1 and 1024`],
        ["error", `svc: could not start: ${path}: extra: unknown field`],
      ]);
    }
  });
  it("exits 1 for a tool schema that would fail every call: a dangling $ref, a keyword of the wrong shape", async () => {
    const tool = { description: "d", url: "http://127.0.0.1:9/t", tenants: ["acme"] };
    const path = writeConfig("bad-schema.json", {
      tools: [
        { ...tool, name: "dangling", input_schema: { type: "object", properties: { a: { $ref: "#/$defs/a" } } } },
        { ...tool, name: "shapeless", input_schema: { type: "object", properties: 5 } },
      ],
    });
    const r = await svc(["-config", path, "-check"]);
    expect(r.code).toBe(1);
    expect(r.stderr.trimEnd().split("\n")).toEqual([
      `${path}: tools[0].input_schema.properties.a.$ref: "#/$defs/a" resolves to nothing in this schema`,
      `${path}: tools[1].input_schema.properties: must be an object whose values are schemas`,
    ]);
  });
  it("exits 1 and names the variable when a referenced environment variable is missing", async () => {
    const path = writeConfig("missing-env.json");
    const r = await svc(["-config", path, "-check"], { SVC_TOKEN: ENV.SVC_TOKEN });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`${path}: providers.openai.api_key_env: environment variable OPENAI_KEY is not set\n`);
  });
  it("exits 1 without printing the secret when a token secret is too short", async () => {
    const path = writeConfig("short-secret.json");
    const r = await svc(["-config", path, "-check"], { ...ENV, SVC_TOKEN: "short-secret-value" });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("tokens[0].token_env: environment variable SVC_TOKEN must hold at least 24 bytes");
    expect(r.stderr).not.toContain("short-secret-value");
  });
  it("exits 1 for a missing file and for trailing data", async () => {
    const missing = join(dir, "nope.json");
    expect(await svc(["-config", missing, "-check"])).toMatchObject({ code: 1, stderr: `${missing}: no such file\n` });
    // A FIFO with no writer is refused at once: the open does not wait for one, at -check or a start.
    const fifo = join(dir, "fifo.json");
    execFileSync("mkfifo", [fifo]);
    expect(await svc(["-config", fifo, "-check"])).toMatchObject({ code: 1, stderr: `${fifo}: not a regular file\n` });
    expect(await svc(["-config", fifo])).toMatchObject({ code: 1 });
    const trailing = join(dir, "trailing.json");
    writeFileSync(trailing, `${readFileSync(writeConfig("t.json"), "utf8")}\n{}`);
    expect((await svc(["-config", trailing, "-check"])).stderr).toMatch(/unexpected data after the root object/);
  });
  it("rejects a file over 4 MiB", async () => {
    const big = join(dir, "big.json");
    writeFileSync(big, Buffer.alloc(4 * 1024 * 1024 + 1, 0x20));
    const r = await svc(["-config", big, "-check"]);
    expect(r).toMatchObject({ code: 1, stderr: `${big}: the configuration is larger than 4194304 bytes (4 MiB)\n` });
  });
});

describe("a data_dir that cannot hold the stack's state is refused before anything starts", () => {
  const file = join(dir, "plain-file");
  writeFileSync(file, "not a directory\n");
  const runnerEnv = { RUNNER_SECRET: "runner-secret-0123456789abcdef" };

  it("-check names a data_dir that is a regular file, lies under one, or is a link to nothing, and creates nothing", async () => {
    const onFile = writeConfig("data-on-file.json", { data_dir: file });
    expect(await svc(["-config", onFile, "-check"])).toEqual({ code: 1, stdout: "", stderr: `${onFile}: data_dir ${file} is not a directory\n` });
    const under = writeConfig("data-under-file.json", { data_dir: join(file, "state") });
    const r = await svc(["-config", under, "-check"]);
    expect(r).toMatchObject({ code: 1, stdout: "" });
    expect(r.stderr).toMatch(/data_dir .*plain-file\/state cannot be created: /);
    const dangling = join(dir, "dangling");
    symlinkSync(join(dir, "nowhere"), dangling);
    const onLink = writeConfig("data-on-dangling.json", { data_dir: dangling });
    expect(await svc(["-config", onLink, "-check"])).toEqual({ code: 1, stdout: "", stderr: `${onLink}: data_dir ${dangling} is a symbolic link to nothing\n` });
    const runner = writeConfig("data-on-file-runner.json", { data_dir: file, runners: { token_env: "RUNNER_SECRET" } });
    expect(await svc(["runner", "-config", runner, "-check"], runnerEnv)).toMatchObject({ code: 1, stderr: `${runner}: data_dir ${file} is not a directory\n` });
  });

  it("-check accepts a data_dir that does not exist yet under a writable directory, without creating it", async () => {
    const nested = join(dir, "later", "deeper", "state");
    const path = writeConfig("data-later.json", { data_dir: nested });
    expect(await svc(["-config", path, "-check"])).toMatchObject({ code: 0 });
    expect(existsSync(join(dir, "later"))).toBe(false);
  });

  it("the local stack and svc runner exit 1 with the same sentence as one JSON line", async () => {
    const stack = await svc(["-config", writeConfig("start-on-file.json", { data_dir: file })]);
    expect(stack.code).toBe(1);
    expect(stack.stderr.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ level: "error", msg: `svc: could not start: data_dir ${file} is not a directory` }),
    ]);
    const runner = await svc(["runner", "-config", writeConfig("start-on-file-runner.json", { data_dir: file, runners: { token_env: "RUNNER_SECRET" }, public_url: "http://127.0.0.1:9" })], runnerEnv);
    expect(runner.code).toBe(1);
    expect(runner.stderr).toContain(`"msg":"svc: could not start: data_dir ${file} is not a directory"`);
  });
});

describe("a filesystem persistence directory is held to the same rules", () => {
  const file = join(dir, "store-file");
  writeFileSync(file, "not a directory\n");

  it("-check and the start refuse a regular file as persistence.directory, naming the field", async () => {
    const path = writeConfig("store-on-file.json", { persistence: { provider: "filesystem", directory: file } });
    expect(await svc(["-config", path, "-check"])).toEqual({ code: 1, stdout: "", stderr: `${path}: persistence.directory ${file} is not a directory\n` });
    const start = await svc(["-config", path]);
    expect(start.code).toBe(1);
    expect(start.stderr).toContain(`"msg":"svc: could not start: persistence.directory ${file} is not a directory"`);
  });

  it.runIf(existsSync("/proc/self"))("a data_dir the kernel will not create (under /proc) fails the start at once", async () => {
    const start = await svc(["-config", writeConfig("data-in-proc.json", { data_dir: "/proc/svc-no-such-dir" })]);
    expect(start.code).toBe(1);
    // As root, mkdir's ENOENT; otherwise /proc is not writable, found before anything is tried.
    expect(start.stderr).toMatch(/"msg":"svc: could not start: data_dir \/proc\/svc-no-such-dir cannot be created: (ENOENT|\/proc is not writable)/);
  });
});

describe("svc command line", () => {
  it("exits 2 with usage on stderr for an unknown flag", async () => {
    const r = await svc(["-config", "x.json", "-verbose"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^svc: unknown flag -verbose\nusage: svc /);
  });
  it("exits 2 with usage when -config is missing or has no value", async () => {
    expect(await svc(["-check"])).toMatchObject({ code: 2, stderr: expect.stringMatching(/-config <path> is required/) });
    expect(await svc(["-check", "-config"])).toMatchObject({ code: 2, stderr: expect.stringMatching(/-config needs a path/) });
  });
  it("prints usage on stdout and exits 0 for -h", async () => {
    expect(await svc(["-h"])).toMatchObject({ code: 0, stdout: expect.stringMatching(/^usage: svc /), stderr: "" });
  });
});

function envFile(path: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (m) env[m[1]!] = m[2]!;
  }
  return env;
}
