/**
 * A harness command given by name is found on PATH as the harness's own user would find it
 * (runner-host/harness/clean-spawn.ts `lookPath`, `cannotRun`; docs/configuration.md "Harnesses"):
 * a root runner-host's PATH entry that user cannot reach (a version manager's shims under /root)
 * is passed over, and a command that user cannot run fails its start saying so.
 */
import { chmodSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { cannotRun, lookPath } from "../../runner-host/harness/clean-spawn.ts";
import { HarnessProcess } from "../../runner-host/harness/harness-process.ts";
import { rootDir } from "./harness-helpers.ts";

const other = { uid: 4242, gid: 4242 };
const READY = `process.stdout.write(JSON.stringify({type:"ready",protocol:1,engine:"found",max_line_bytes:1024})+"\\n"); setInterval(()=>{},1000);`;

/** `<root>/priv/bin` (0700: only its owner may search it) and `<root>/pub/bin`, each with an executable `tool`. */
function tree() {
  const root = mkdtempSync(join(tmpdir(), "svc-lookup-"));
  chmodSync(root, 0o755);
  const dirs = { priv: join(root, "priv"), pub: join(root, "pub") };
  for (const [name, dir] of Object.entries(dirs)) {
    mkdirSync(join(dir, "bin"), { recursive: true });
    chmodSync(dir, name === "priv" ? 0o700 : 0o755);
    const tool = join(dir, "bin", "tool");
    writeFileSync(tool, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} -e ${JSON.stringify(READY)}\n`);
    chmodSync(tool, 0o755);
  }
  return { root, ...dirs, path: `${join(dirs.priv, "bin")}:${join(dirs.pub, "bin")}` };
}

describe("a harness command found on PATH", () => {
  it("passes over an entry the harness's user cannot reach; this process's own lookup takes the first", () => {
    const t = tree();
    expect(lookPath("tool", t.path)).toBe(join(t.priv, "bin", "tool"));
    expect(lookPath("tool", t.path, other)).toBe(join(t.pub, "bin", "tool"));
    expect(lookPath("missing-tool", t.path, other)).toBe("missing-tool");
  });

  it("says why a file cannot be run by another user: a directory it cannot search, a file it may not execute, a link into a private directory", () => {
    const t = tree();
    expect(cannotRun(join(t.pub, "bin", "tool"), other)).toBeUndefined();
    expect(cannotRun(join(t.priv, "bin", "tool"), other)).toBe(`EACCES (${t.priv} is not searchable by uid 4242)`);
    const ownerOnly = join(t.pub, "bin", "owner-only");
    writeFileSync(ownerOnly, "#!/bin/sh\n");
    chmodSync(ownerOnly, 0o744);
    expect(cannotRun(ownerOnly, other)).toBe(`EACCES (${ownerOnly} is not executable by uid 4242)`);
    // Its group's execute bit is enough for a user in that group (its primary group: spawn drops the others).
    chmodSync(ownerOnly, 0o754);
    expect(cannotRun(ownerOnly, { uid: 4242, gid: process.getgid!() })).toBeUndefined();
    const link = join(t.pub, "bin", "link");
    symlinkSync(join(t.priv, "bin", "tool"), link);
    expect(cannotRun(link, other)).toBe(`EACCES (${t.priv} is not searchable by uid 4242)`);
    expect(cannotRun(join(t.root, "nothing"), other)).toBe("ENOENT");
    expect(cannotRun(join(t.pub, "bin"), other)).toBe("EACCES (not a file)");
  });

  // Harness processes run as users of their own only under a root runner-host.
  it.runIf(process.getuid!() === 0)("a root runner-host starts the harness its user can run, and a command it cannot run fails its start saying why", async () => {
    const t = tree();
    const saved = process.env.PATH;
    process.env.PATH = `${t.path}:${saved}`;
    try {
      const hp = await HarnessProcess.start({ command: ["tool"], rootDir: rootDir(), identity: "own", log: () => {} });
      expect(hp.ready.engine).toBe("found");
      await hp.kill();
      const err = await HarnessProcess.start({ command: [join(t.priv, "bin", "tool")], rootDir: rootDir(), identity: "own", log: () => {} }).catch((e: unknown) => e);
      expect((err as Error).message).toMatch(new RegExp(`spawn_failed.*EACCES \\(${t.priv} is not searchable by uid \\d+\\)`));
    } finally {
      process.env.PATH = saved;
    }
  });
});
