/**
 * The process starter's own program (see ./spawner.ts): a small Node process that starts the
 * runner-host's children, so that the fork behind every start copies this process's few page
 * tables, and holds this event loop, not the runner-host's.
 *
 * Over its IPC channel (JSON, one message at a time):
 *   in:  {t:"spawn", id, file, args, cwd, env, uid?, gid?, pipes}   {t:"go", id}
 *   out: {t:"spawned", id, pid}   {t:"fd", id, fd} + the pipe's socket, for fd 0, 1 and 2
 *        {t:"failed", id, message}   {t:"exit", id, code, signal}
 *
 * With `pipes`, the child also gets a fourth descriptor, its gate: the wrapper it runs
 * (./clean-spawn.ts) waits on it before it becomes the harness, and this process closes it on
 * `go`, which the runner-host sends once it holds all three pipes. Until then nothing can be
 * written into a pipe on its way, and the child cannot end before its pipes are handed over.
 * A child is started in its own process group (the runner-host signals the group). This process
 * ends when the runner-host does (the end of its stdin, a pipe only the runner-host holds); the
 * children then keep running, as a runner-host's own children would.
 */
import { spawn, type ChildProcess } from "node:child_process";
import type { Socket } from "node:net";

/** What to start: `spawn`'s arguments as the runner-host uses them. */
export type SpawnRequest = {
  file: string;
  args: string[];
  cwd?: string;
  env?: Record<string, string>;
  uid?: number;
  gid?: number;
};
type SpawnMessage = SpawnRequest & { t: "spawn"; id: number; pipes: boolean };
export type InMessage = SpawnMessage | { t: "go"; id: number };
export type OutMessage =
  | { t: "spawned"; id: number; pid: number }
  | { t: "fd"; id: number; fd: 0 | 1 | 2 }
  | { t: "failed"; id: number; message: string }
  | { t: "exit"; id: number; code: number | null; signal: NodeJS.Signals | null };

const gates = new Map<number, Socket>();

function send(message: OutMessage, handle?: Socket): void {
  // The runner-host may be gone already: its own children's ends are then no one's concern here.
  if (process.connected) process.send!(message, handle, () => {});
}

function start(m: SpawnMessage): void {
  let child: ChildProcess;
  try {
    child = spawn(m.file, m.args, {
      ...(m.cwd !== undefined ? { cwd: m.cwd } : {}),
      ...(m.env !== undefined ? { env: m.env } : {}),
      ...(m.uid !== undefined ? { uid: m.uid, gid: m.gid } : {}),
      detached: true,
      stdio: m.pipes ? ["pipe", "pipe", "pipe", "pipe"] : "ignore",
    });
  } catch (err) {
    return send({ t: "failed", id: m.id, message: `spawn ${m.file} ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` });
  }
  child.once("error", (err: NodeJS.ErrnoException) => {
    if (child.pid === undefined) send({ t: "failed", id: m.id, message: `spawn ${m.file} ${err.code ?? err.message}` });
  });
  if (child.pid === undefined) return; // `error` follows
  child.once("exit", (code, signal) => {
    gates.get(m.id)?.destroy();
    gates.delete(m.id);
    send({ t: "exit", id: m.id, code, signal });
  });
  send({ t: "spawned", id: m.id, pid: child.pid });
  if (!m.pipes) return;
  const [stdin, stdout, stderr, gate] = child.stdio as unknown as Socket[] as [Socket, Socket, Socket, Socket];
  gate.on("error", () => {});
  gates.set(m.id, gate);
  // Each handle leaves once the previous one is acknowledged; this process's copy closes then.
  send({ t: "fd", id: m.id, fd: 0 }, stdin);
  send({ t: "fd", id: m.id, fd: 1 }, stdout);
  send({ t: "fd", id: m.id, fd: 2 }, stderr);
}

process.on("message", (m: InMessage) => {
  if (m.t === "spawn") return start(m);
  gates.get(m.id)?.destroy();
  gates.delete(m.id);
});
// The runner-host's end is told by stdin's end, not the channel's `disconnect`: Node holds that back
// while a handle waits for its acknowledgement, which a runner-host gone mid-hand-over never sends —
// and the child would wait at its gate for good. Exiting closes the gates: such a child then runs
// with no one on its pipes, and a harness exits at the end of its stdin.
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();
