/**
 * How the runner-host starts its children: through one small helper process (./spawner-helper.ts)
 * that does the `spawn` and hands the child's pipes over (SCM_RIGHTS over Node's IPC channel).
 *
 * Why: Node's `spawn` forks, and the fork copies the caller's page tables while its event loop
 * waits — 12–27 ms for a runner-host of ~250 MiB on a 2-core guest with page-table isolation,
 * 23–45 ms at 650 MiB, during which no session on the runner-host moves. The helper stays small
 * (~45 MiB), so its forks are cheap, and they hold its loop, not ours (docs/design-notes.md).
 *
 * Lifecycle: the helper is started on first use, once (its own start forks us once), and kept
 * while anything is in flight or running; it holds nothing else. If it ends, every child it
 * started is killed with its process group and reported as ended by SIGKILL (no one is left to
 * learn how it ended), every start in flight fails, and the next start brings a new helper.
 * Invariants: a child reaches its caller with all three pipes or not at all; its pipes are ours
 * alone before it runs (the gate, see the helper).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import type { Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { log } from "../log.ts";
// Types only: the helper module itself runs in the helper process (it listens on its IPC channel).
import type { InMessage, OutMessage, SpawnRequest } from "./spawner-helper.ts";

export type { SpawnRequest };

const HELPER = fileURLToPath(new URL("./spawner-helper.ts", import.meta.url));

/**
 * A child started through the helper: what the runner-host used of Node's `ChildProcess`. Emits
 * `exit` (code, signal) when it ends and `close` (code, signal) once it ended and its stdout and
 * stderr closed.
 */
export class SpawnedChild extends EventEmitter {
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  readonly pid: number;
  readonly stdin: Socket;
  readonly stdout: Socket;
  readonly stderr: Socket;
  #open = 2;
  #ended = false;

  constructor(pid: number, [stdin, stdout, stderr]: Socket[]) {
    super();
    this.pid = pid;
    this.stdin = stdin!;
    this.stdout = stdout!;
    this.stderr = stderr!;
    for (const s of [this.stdout, this.stderr]) {
      s.once("close", () => {
        this.#open--;
        this.#maybeClose();
      });
    }
  }

  /** The helper saw the process end (or, gone itself, had it killed). */
  ended(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.#ended) return;
    this.#ended = true;
    if (signal) this.signalCode = signal;
    else this.exitCode = code;
    this.stdin.destroy();
    this.emit("exit", code, signal);
    this.#maybeClose();
  }

  #maybeClose(): void {
    if (this.#ended && this.#open === 0) this.emit("close", this.exitCode, this.signalCode);
  }
}

type Call = {
  req: SpawnRequest & { pipes: boolean };
  resolve(child: SpawnedChild): void;
  reject(err: Error): void;
  pid?: number;
  fds: (Socket | undefined)[];
  got: number;
  child?: SpawnedChild;
  /** `run`: settled when the process ends. */
  onExit?: () => void;
};

export class Spawner {
  #helper?: ChildProcess;
  #calls = new Map<number, Call>();
  #nextId = 1;

  /**
   * Starts `req` with three pipes and its gate on descriptor 3; resolves once the runner-host holds
   * the pipes and the gate is opened. The command must wait on its gate, as the start wrapper
   * (./clean-spawn.ts) does: one that ends before its pipes are handed over fails the start.
   */
  spawn(req: SpawnRequest): Promise<SpawnedChild> {
    return new Promise((resolve, reject) => {
      this.#send({ req: { ...req, pipes: true }, resolve, reject, fds: [], got: 0 });
    });
  }

  /** Runs `req` with no stdio and resolves when it ended; rejects if it could not start. */
  run(req: SpawnRequest): Promise<void> {
    return new Promise((resolve, reject) => {
      const call: Call = { req: { ...req, pipes: false }, resolve: () => {}, reject, fds: [], got: 0, onExit: resolve };
      this.#send(call);
    });
  }

  #send(call: Call): void {
    const id = this.#nextId++;
    this.#calls.set(id, call);
    const helper = this.#ensure();
    this.#hold();
    helper.send({ t: "spawn", id, ...call.req } satisfies InMessage);
  }

  #ensure(): ChildProcess {
    if (this.#helper) return this.#helper;
    // A process group of its own: a terminal's Ctrl-C to the runner-host's group must not end it
    // (and with it every harness) before the runner-host's own orderly stop has run.
    // Its stdin is its lifeline: it ends with this process (see the helper).
    const helper = spawn(process.execPath, ["--no-warnings", HELPER], { stdio: ["pipe", "inherit", "inherit", "ipc"], detached: true });
    helper.stdin!.on("error", () => {});
    helper.on("message", (m: OutMessage, handle?: Socket) => this.#onMessage(m, handle));
    helper.on("error", () => {}); // its end is `exit`, below
    helper.once("exit", (code, signal) => this.#lost(helper, code, signal));
    this.#helper = helper;
    return helper;
  }

  #onMessage(m: OutMessage, handle: Socket | undefined): void {
    const call = this.#calls.get(m.id);
    if (!call) {
      handle?.destroy();
      return;
    }
    switch (m.t) {
      case "spawned":
        call.pid = m.pid;
        return;
      case "fd":
        call.fds[m.fd] = handle;
        if (++call.got < 3) return;
        if (call.fds.some((s) => s === undefined)) {
          // The child ended (killed from outside) before its pipes left the helper.
          for (const s of call.fds) s?.destroy();
          killGroup(call.pid!);
          this.#calls.delete(m.id);
          call.reject(new Error(`spawn ${call.req.file}: the process ended before its pipes were handed over`));
          return this.#hold();
        }
        call.child = new SpawnedChild(call.pid!, call.fds as Socket[]);
        this.#helper?.send({ t: "go", id: m.id } satisfies InMessage);
        call.resolve(call.child);
        return;
      case "failed":
        this.#calls.delete(m.id);
        call.reject(new Error(m.message));
        return this.#hold();
      case "exit":
        this.#calls.delete(m.id);
        call.child?.ended(m.code, m.signal);
        call.onExit?.();
        if (call.req.pipes && !call.child) {
          // It ended between its start and the last of its pipes (killed from outside).
          for (const s of call.fds) s?.destroy();
          call.reject(new Error(`spawn ${call.req.file}: the process ended before it started (code ${m.code}, signal ${m.signal})`));
        }
        return this.#hold();
    }
  }

  /** The helper ended: nothing it started can be followed any more. */
  #lost(helper: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.#helper === helper) this.#helper = undefined;
    const calls = [...this.#calls.values()];
    this.#calls.clear();
    log("error", "process starter exited", { code, signal, processes_killed: calls.filter((c) => c.pid !== undefined).length, starts_failed: calls.filter((c) => c.pid === undefined).length });
    for (const call of calls) {
      if (call.pid !== undefined) killGroup(call.pid);
      if (call.child) call.child.ended(null, "SIGKILL");
      else if (call.onExit && call.pid !== undefined) call.onExit();
      else call.reject(new Error(`spawn ${call.req.file}: the process starter exited`));
    }
  }

  /** The helper keeps the runner-host alive only while something started through it runs. */
  #hold(): void {
    const h = this.#helper;
    if (!h) return;
    if (this.#calls.size > 0) {
      h.ref();
      h.channel?.ref();
    } else {
      h.unref();
      h.channel?.unref();
    }
  }
}

function killGroup(pid: number): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, "SIGKILL");
    } catch {
      // ESRCH: gone already.
    }
  }
}

let shared: Spawner | undefined;

/** This process's one starter. */
export function spawner(): Spawner {
  shared ??= new Spawner();
  return shared;
}
