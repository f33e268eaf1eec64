/**
 * The faults a chaos run injects, each while turns are in flight, and what the service must do.
 * A fault runs on a live topology; `inject` returns once the fault has happened and the service
 * is back (restarted, reconnected, calm), so the run can wait for every turn to end.
 *
 * Expected endings (judged in judge.ts; "harmed" when a turn marked idle ends otherwise):
 * - harness-kill: turns in the killed process end `failed`/`service_error`; others go on.
 * - runner-kill: turns on the lost runner-host end `failed`/`service_error`; the new one serves.
 * - link-drop: SIGHUP restarts the Worker runtime (every socket drops, like a deploy); turns go on
 *   or end in a documented end state (docs/api.md "Turns") within the link's grace.
 * - stack-kill: SIGKILL of the service and the runner-host, restart on the same data_dir.
 * - slow-consumer: readers stall while a turn bursts; the server may cut them; they resume.
 * - provider-storm: in-flight provider streams are cut and requests get 5xx for a while: turns end
 *   `interrupted`/`provider_error`.
 * In every case the recovery turn sent after the fault (and a resume, when needed) ends `idle`.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Rng } from "./rng.ts";
import type { SessionClient } from "./session-client.ts";
import type { Topology } from "./topology.ts";

/** How long the service may take to come back after a fault, ms. */
const BACK_MS = 60_000;

export type TurnShape = { text: string; /** retained event types that show it is in flight */ inFlight: readonly string[] };

export type Fault = {
  name: string;
  what: string;
  /** The in-flight turn each session runs when the fault lands. */
  shape(r: Rng, n: number): TurnShape;
  inject(t: Topology, r: Rng, sessions: readonly SessionClient[]): Promise<void>;
  /** Undo what `inject` left on the clients (a stalled reader), once the in-flight turns ended. */
  settle?(sessions: readonly SessionClient[]): void;
};

const streaming = (r: Rng): TurnShape => ({ text: `[[deltas ${r.int(30, 70)} size=16]] [[delay ${r.int(15, 35)}]]`, inFlight: ["session.status"] });
const toolCall = (r: Rng, n: number): TurnShape => ({ text: `[[tool echo {"ms":${r.int(200, 1200)},"n":${n}}]]`, inFlight: ["tool.call"] });
const mixed = (r: Rng, n: number): TurnShape => (r.next() < 0.5 ? streaming(r) : toolCall(r, n));

export const FAULTS: readonly Fault[] = [
  {
    name: "harness-kill",
    what: "kill -9 of a harness process",
    shape: mixed,
    async inject(t, r) {
      const pids = t.currentHarnessPids();
      if (pids.length === 0) throw new Error("no live harness process to kill");
      process.kill(r.pick(pids), "SIGKILL");
    },
  },
  {
    name: "runner-kill",
    what: "kill -9 of the runner-host (`svc runner`), then a new one",
    shape: mixed,
    async inject(t) {
      await t.runner.crash();
      await t.startRunner();
    },
  },
  {
    name: "link-drop",
    what: "SIGHUP of the service: the Worker runtime restarts, every link and stream socket drops",
    shape: mixed,
    async inject(t) {
      t.down();
      const mark = t.stack.mark();
      t.stack.child.kill("SIGHUP");
      await t.stack.waitForLog(/"msg":"worker reloaded"/, BACK_MS, mark);
      t.up();
    },
  },
  {
    name: "stack-kill",
    what: "SIGKILL of the service and the runner-host, restart on the same data_dir",
    shape: mixed,
    async inject(t) {
      t.down();
      await Promise.all([t.stack.crash(), t.runner.crash()]);
      await t.startStack();
      t.up();
      await t.startRunner();
    },
  },
  {
    name: "slow-consumer",
    what: "every reader stalls while its turn bursts deltas",
    shape: (r) => ({ text: `[[deltas ${r.int(150, 300)} size=${r.int(512, 2048)}]]`, inFlight: ["session.status"] }),
    async inject(_t, r, sessions) {
      for (const s of sessions) {
        let frames = 0;
        const every = r.int(4, 16);
        const pause = r.int(100, 600);
        s.follower.stall = () => (frames++ % every === 0 ? sleep(pause) : Promise.resolve());
      }
    },
    settle(sessions) {
      for (const s of sessions) s.follower.stall = undefined;
    },
  },
  {
    name: "provider-storm",
    what: "the provider cuts its streams and answers 5xx for a while",
    shape: streaming,
    async inject(t, r) {
      t.peers.storm();
      await sleep(r.int(200, 1500));
      t.peers.calm();
    },
  },
];

export const OVERSIZE = "oversize-native-state";
