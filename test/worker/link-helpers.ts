/**
 * The test plays a runner-host: a control socket at the pool (`runnerHost`), then a session's link
 * socket (`link`, `openedLink`), each with an inbox of what the service sent it. Call `closeLinks`
 * after each test.
 */
import { RUNNER_PROTOCOL, type LinkDown, type LinkUp } from "../../src/shared/runner-protocol.ts";
import { POOL_NAME } from "../../src/runner/pool-name.ts";
import { env, sessionStub, withTimeout } from "./helpers.ts";

export const USAGE = { input_tokens: 1, output_tokens: 2, cache_read_tokens: 0, cache_write_tokens: 0, total_tokens: 3 };

const open: WebSocket[] = [];

export function closeLinks(): void {
  for (const ws of open.splice(0)) ws.close();
}

/** Messages a socket received, with a wait for the next one that matches. */
export function inbox<T extends { t: string }>(ws: WebSocket) {
  const got: T[] = [];
  const waiters: { test: (m: T) => boolean; resolve: (m: T) => void }[] = [];
  ws.addEventListener("message", (e) => {
    const m = JSON.parse(e.data as string) as T;
    got.push(m);
    for (const w of [...waiters]) if (w.test(m)) (waiters.splice(waiters.indexOf(w), 1), w.resolve(m));
  });
  return {
    got,
    next: (test: (m: T) => boolean, what: string) =>
      withTimeout(
        new Promise<T>((resolve) => {
          const seen = got.find(test);
          if (seen) return resolve(seen);
          waiters.push({ test, resolve });
        }),
        5_000,
        what,
      ),
  };
}

export async function runnerHost() {
  const res = await env.RUNNERS.getByName(POOL_NAME).fetch("https://pool/control", { headers: { Upgrade: "websocket" } });
  const ws = res.webSocket!;
  ws.accept();
  open.push(ws);
  const control = inbox<{ t: string; session?: string; lease?: number }>(ws);
  const capacity = { loaded: 0, loaded_limit: 100, idle: 0 };
  ws.send(JSON.stringify({ t: "hello", protocol: RUNNER_PROTOCOL, runner_id: "e".repeat(32), boot: "f".repeat(32), harnesses: ["pi"], draining: false, capacity }));
  await control.next((m) => m.t === "welcome", "welcome");
  return control;
}

export async function link(id: string, lease: number) {
  const res = await sessionStub(id).fetch(`https://session/link?lease=${lease}`, { headers: { Upgrade: "websocket" } });
  const ws = res.webSocket!;
  ws.accept();
  open.push(ws);
  const box = inbox<LinkDown>(ws);
  const send = (m: LinkUp) => ws.send(JSON.stringify(m));
  return { ws, box, send };
}

/** Dials the session's link as its runner-host, says hello, opens, and returns the link with the first `run`. */
export async function openedLink(id: string, lease: number) {
  const l = await link(id, lease);
  await l.box.next((m) => m.t === "ack", "the object's ack on accept");
  l.send({ t: "hello", down: 0 });
  await l.box.next((m) => m.t === "open", "open");
  l.send({ t: "ack", down: 1 });
  l.send({ t: "opened", seq: 1 });
  return { ...l, run: (await l.box.next((m) => m.t === "run", "run")) as Extract<LinkDown, { t: "run" }> };
}
