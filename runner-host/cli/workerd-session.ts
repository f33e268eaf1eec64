/**
 * The local stack's workerd runs in a session of its own.
 *
 * Miniflare spawns workerd in svc's process group, so a terminal's Ctrl-C (SIGINT to the whole
 * foreground group) or a group-wide SIGTERM (systemd's default, `kill -- -pgid`) reached workerd
 * as well as svc: workerd stopped serving at once while svc drained, so requests during the drain
 * got no answer instead of `429 overloaded` and open event streams were cut instead of ended.
 * Started through `setsid` (a new session and process group: group signals no longer reach it)
 * and `setpriv --pdeathsig KILL` (it dies with svc even if svc is killed outright), workerd is
 * stopped by svc alone, after the drain. Needs util-linux's `setsid` and `setpriv` (every Debian
 * and Ubuntu system has them); without them, or when the user set MINIFLARE_WORKERD_PATH,
 * workerd starts as Miniflare starts it.
 */
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { lookPath } from "../harness/clean-spawn.ts";

const WRAPPER = fileURLToPath(new URL("./workerd-own-session.sh", import.meta.url));

/** Points Miniflare at the wrapper (in `env`, which Miniflare reads); false when it cannot. */
export function workerdInOwnSession(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.MINIFLARE_WORKERD_PATH !== undefined) return env.MINIFLARE_WORKERD_PATH === WRAPPER;
  if (process.platform !== "linux") return false;
  if (["setsid", "setpriv"].some((tool) => lookPath(tool, env.PATH) === tool)) return false;
  // The workerd binary Miniflare itself would start.
  const workerd = (createRequire(createRequire(import.meta.url).resolve("miniflare"))("workerd") as { default: string }).default;
  env.SVC_WORKERD_BIN = workerd;
  env.MINIFLARE_WORKERD_PATH = WRAPPER;
  return true;
}
