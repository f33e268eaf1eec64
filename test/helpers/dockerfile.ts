/**
 * A rehearsal of a Dockerfile's build without a Docker engine (none runs on the test machines):
 * each stage gets a directory standing for its filesystem root; `WORKDIR`, `COPY` (from the build
 * context, minus what .dockerignore excludes, or `--from` an earlier stage) and the `RUN` commands
 * that build the application (`npm …`, `node …`) happen there, so a file the image lacks, or a
 * build step that needs a file no `COPY` brings, fails here as it would in `docker build`. What a
 * `RUN` does to the system (packages, directories at absolute paths, npm's cache) is returned as
 * skipped, for the caller to hold to the list it expects: a new step is never passed over unseen.
 * The base image's Node is the caller's (`PATH`).
 */
import { execFileSync } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

export type Rehearsal = {
  /** Where the stages' roots are: remove it when done. */
  dir: string;
  /** The last stage's working directory: the image's files, as the CMD sees them. */
  workdir: string;
  /** The `RUN` commands (split at `&&`) that were not run, in order. */
  skipped: string[];
  /** The last stage's `ENV` settings. */
  env: Record<string, string>;
};

/** Instructions as [keyword, argument], comments dropped and continuation lines joined. */
export function instructions(dockerfile: string): [string, string][] {
  const joined = dockerfile.replace(/\\\n/g, " ");
  return joined
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"))
    .map((l) => {
      const [keyword, ...rest] = l.split(/\s+/);
      return [keyword!.toUpperCase(), rest.join(" ")];
    });
}

/** A .dockerignore line as a whole-path pattern (`*` within one path segment). */
function pattern(line: string): RegExp {
  return new RegExp(`^${line.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}$`);
}

/** Whether .dockerignore excludes `rel` (a path in the context): a pattern names it or a folder above it. */
function ignored(patterns: RegExp[], rel: string): boolean {
  const parts = rel.split("/");
  return parts.some((_, i) => {
    const p = parts.slice(0, i + 1).join("/");
    return patterns.some((re) => re.test(p));
  });
}

/** Runs the application steps of `dockerfile` with `context` as the build context. */
export function rehearse(dockerfile: string, context: string, env: Record<string, string>): Rehearsal {
  const base = mkdtempSync(path.join(tmpdir(), "svc-image-"));
  // Harness processes run as other users: they must reach the built files, as in an image.
  chmodSync(base, 0o755);
  const patterns = readFileSync(path.join(context, ".dockerignore"), "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"))
    .map(pattern);
  /** Each stage's root directory, by its name (`AS …`) or its index, for `COPY --from`. */
  const stages = new Map<string, string>();
  const skipped: string[] = [];
  let imageEnv: Record<string, string> = {};
  let root = "";
  let workdir = "";
  const inImage = (p: string) => (p.startsWith("/") ? path.join(root, p) : path.join(workdir, p));
  for (const [keyword, arg] of instructions(dockerfile)) {
    if (keyword === "FROM") {
      root = path.join(base, String(stages.size));
      mkdirSync(root, { mode: 0o755 });
      workdir = root;
      imageEnv = {};
      const name = /\sAS\s+(\S+)$/i.exec(arg)?.[1];
      stages.set(name ?? String(stages.size), root);
    } else if (keyword === "WORKDIR") {
      workdir = inImage(arg);
      mkdirSync(workdir, { recursive: true, mode: 0o755 });
    } else if (keyword === "COPY") {
      const words = arg.split(/\s+/);
      const from = words[0]!.startsWith("--from=") ? stages.get(words.shift()!.slice("--from=".length)) : undefined;
      const dest = words.pop()!;
      for (const src of words) {
        const target = dest.endsWith("/") || words.length > 1 ? path.join(inImage(dest), path.basename(src)) : inImage(dest);
        if (from) cpSync(path.join(from, src), target, { recursive: true });
        else cpSync(path.join(context, src), target, { recursive: true, filter: (p) => !ignored(patterns, path.relative(context, p)) });
      }
    } else if (keyword === "ENV") {
      for (const [, k, v] of arg.matchAll(/(\w+)=(\S*)/g)) imageEnv[k!] = v!;
    } else if (keyword === "RUN") {
      for (const command of arg.split("&&").map((c) => c.trim())) {
        if (!/^(npm ci|node) /.test(command)) {
          skipped.push(command);
          continue;
        }
        try {
          execFileSync("sh", ["-c", command], { cwd: workdir, env: { ...env, ...imageEnv }, stdio: ["ignore", "pipe", "pipe"] });
        } catch (e) {
          const { stdout, stderr } = e as { stdout?: Buffer; stderr?: Buffer };
          throw new Error(`RUN ${command} failed in ${workdir}:\n${`${stdout ?? ""}${stderr ?? ""}`.slice(-2000)}`);
        }
      }
    }
  }
  return { dir: base, workdir, skipped, env: imageEnv };
}
