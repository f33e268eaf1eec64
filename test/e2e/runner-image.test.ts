/**
 * The runner-host image (Dockerfile). No Docker engine runs on the test machines, so this runs
 * the image's exact command: the Dockerfile's CMD (what tini starts) from the repository root,
 * which is the image's working directory, with its /etc/svc/runner.json mapped to a temporary
 * file. It dials a real local stack, and SIGTERM during a running turn drains within the grace
 * period the runbook gives the container.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call } from "../helpers/api.ts";
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
    // The image's PATH finds its Node 24 as `node`; here that is this test's own Node.
    const runner = spawnLogged(process.execPath, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? "", HOME: stack.dir, ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}), SVC_RUNNER_SECRET: env.SVC_RUNNER_SECRET } });
    await runner.waitFor(/"msg":"runner-host connected"/);

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
