/**
 * Placement (spec Limits `loaded`, docs/api.md "Sending input"): a message that needs the session
 * placed gets `429 overloaded` when every runner-host serving its harness is at `limits.loaded`
 * with nothing idle to drop; with no runner-host connected at all it is accepted and waits.
 */
import { describe, expect, it } from "vitest";
import { RUNNER_PROTOCOL } from "../../src/shared/runner-protocol.ts";
import { POOL_NAME } from "../../src/runner/pool-name.ts";
import { api, createSession, env } from "./helpers.ts";

async function connectRunner(capacity: { loaded: number; loaded_limit: number; idle: number }): Promise<WebSocket> {
  const res = await env.RUNNERS.getByName(POOL_NAME).fetch("https://pool/control", { headers: { Upgrade: "websocket" } });
  const ws = res.webSocket!;
  ws.accept();
  const welcome = new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("no welcome from the pool")), 5_000);
    ws.addEventListener("message", (e) => {
      if (JSON.parse(e.data as string).t === "welcome") (clearTimeout(t), resolve());
    });
  });
  ws.send(JSON.stringify({ t: "hello", protocol: RUNNER_PROTOCOL, runner_id: "c".repeat(32), boot: "d".repeat(32), harnesses: ["pi"], draining: false, capacity }));
  await welcome;
  return ws;
}

const message = (id: string) => api(`/sessions/${id}/events`, { method: "POST", body: JSON.stringify({ type: "user.message", text: "hi" }) });

describe("placement", () => {
  it("accepts a message that waits when no runner-host is connected", async () => {
    const s = await createSession();
    expect((await message(s.id)).status).toBe(202);
  });

  it("refuses with 429 when every runner-host is at limits.loaded with nothing idle, and records nothing", async () => {
    const ws = await connectRunner({ loaded: 1, loaded_limit: 1, idle: 0 });
    const s = await createSession();
    const r = await message(s.id);
    expect(r.status).toBe(429);
    expect(r.headers.get("Retry-After")).toBe("1");
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("overloaded");
    const events = (await (await api(`/sessions/${s.id}/events`)).json()) as { events: unknown[] };
    expect(events.events).toHaveLength(0);
    ws.close();
  });

  it("accepts when a full runner-host has an idle session it can drop", async () => {
    const ws = await connectRunner({ loaded: 1, loaded_limit: 1, idle: 1 });
    const s = await createSession();
    expect((await message(s.id)).status).toBe(202);
    ws.close();
  });
});
