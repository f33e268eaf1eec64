/**
 * Runs one `svc` command to completion (`node cli/svc.mjs <args>`) with exactly the given
 * environment, and a helper that writes large host configurations for the deploy tests.
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { ROOT } from "./stack.ts";

export type SvcResult = { code: number | null; stdout: string; stderr: string };

export function runSvc(args: readonly string[], o: { env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {}): Promise<SvcResult> {
  const child = spawn(process.execPath, [path.join(ROOT, "cli/svc.mjs"), ...args], {
    cwd: o.cwd ?? ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", WRANGLER_SEND_METRICS: "false", ...o.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`svc ${args.join(" ")} did not finish; stderr:\n${stderr.slice(-4000)}`));
    }, o.timeoutMs ?? 60_000);
    child.once("exit", (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * `count` host tools with `descriptionBytes`-long descriptions: the bulk of a large but ordinary
 * host configuration (many tenants' tools). Each description starts with `marker-<i>`.
 */
export function manyTools(count: number, descriptionBytes: number, tenants: string[]) {
  return Array.from({ length: count }, (_, i) => ({
    name: `tool_${i}`,
    description: `marker-${i} ${"lorem ipsum dolor sit amet ".repeat(Math.ceil(descriptionBytes / 27))}`.slice(0, descriptionBytes),
    input_schema: { type: "object" },
    url: `https://tools.example/${i}`,
    tenants,
  }));
}
