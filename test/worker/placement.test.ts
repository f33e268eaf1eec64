/**
 * Placement (spec Limits `loaded`, docs/api.md "Sending input"): a message that needs the session
 * placed gets `429 overloaded` when every runner-host serving its harness is at `limits.loaded`
 * with nothing idle to drop; with no runner-host connected at all it is accepted and waits.
 */
import { describe, expect, it } from "vitest";
import { api, connectRunner, createSession } from "./helpers.ts";


const message = (id: string) => api(`/sessions/${id}/events`, { method: "POST", body: JSON.stringify({ type: "user.message", text: "hi" }) });

describe("placement", () => {
  it("accepts a message that waits when no runner-host is connected", async () => {
    const s = await createSession();
    expect((await message(s.id)).status).toBe(202);
  });

  it("refuses with 429 when every runner-host is at limits.loaded with nothing idle, and records nothing", async () => {
    const ws = await connectRunner({ capacity: { loaded: 1, loaded_limit: 1, idle: 0 } });
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
    const ws = await connectRunner({ capacity: { loaded: 1, loaded_limit: 1, idle: 1 } });
    const s = await createSession();
    expect((await message(s.id)).status).toBe(202);
    ws.close();
  });
});
