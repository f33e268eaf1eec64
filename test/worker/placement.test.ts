/**
 * Placement (`limits.loaded`, docs/api.md "Sending input"): a message that needs the session
 * placed gets `429 overloaded` when every runner-host serving its harness is at `limits.loaded`
 * with nothing idle to drop; with no runner-host connected at all it is accepted and waits. A
 * session closed while it waits is forgotten by the pool: no runner-host is given it later.
 */
import { describe, expect, it } from "vitest";
import { api, connectRunner, createSession, withTimeout } from "./helpers.ts";


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

  it("a session closed while it waits for a runner-host is withdrawn: the next runner-host gets the others, not it", async () => {
    const [closed, sentinel] = [await createSession(), await createSession()];
    expect((await message(closed.id)).status).toBe(202);
    expect((await message(sentinel.id)).status).toBe(202);
    expect((await api(`/sessions/${closed.id}/close`, { method: "POST" })).status).toBe(202);
    const ws = await connectRunner({ capacity: { loaded: 0, loaded_limit: 100, idle: 0 } });
    const attached: string[] = [];
    const sentinelPlaced = new Promise<void>((resolve) =>
      ws.addEventListener("message", (e) => {
        const m = JSON.parse(e.data as string) as { t: string; session?: string };
        if (m.t !== "attach") return;
        attached.push(m.session!.split(":")[0]!);
        if (m.session!.startsWith(sentinel.id)) resolve();
      }),
    );
    await withTimeout(sentinelPlaced, 5_000, "the waiting session's attach");
    // The closed one waited longer: had it still been waiting, its attach would have come first.
    expect(attached).not.toContain(closed.id);
    ws.close();
  });

  it("accepts when a full runner-host has an idle session it can drop", async () => {
    const ws = await connectRunner({ capacity: { loaded: 1, loaded_limit: 1, idle: 1 } });
    const s = await createSession();
    expect((await message(s.id)).status).toBe(202);
    ws.close();
  });
});
