/**
 * Placement (`limits.loaded`, docs/api.md "Sending input"): a message that needs the session
 * placed gets `429 overloaded` when every runner-host serving its harness is at `limits.loaded`
 * with nothing idle to drop; with no runner-host connected at all it is accepted and waits. A
 * session closed while it waits is forgotten by the pool: no runner-host is given it later.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { POOL_NAME } from "../../src/runner/pool-name.ts";
import type { RunnerPool } from "../../src/runner/runner-pool.ts";
import { SessionState } from "../../src/session/session-state.ts";
import { api, connectRunner, createSession, sessionStub, withTimeout } from "./helpers.ts";


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

  it("a runner-host's hello hands back a session waiting for a harness the configuration no longer has, to its object", async () => {
    const s = await createSession();
    expect((await message(s.id)).status).toBe(202); // no runner-host: it waits in the pool
    // As after a deploy that renamed the harness: the pool holds it for a harness now unconfigured.
    await runInDurableObject(env.RUNNERS.getByName(POOL_NAME), (_pool: RunnerPool, state) => {
      state.storage.sql.exec("UPDATE waiting SET harness = 'retired' WHERE session LIKE ?", `${s.id}%`);
    });
    const ws = await connectRunner({ capacity: { loaded: 0, loaded_limit: 10, idle: 0 } });
    // Handed back, its object judges it under the configuration it has (here `pi` is configured,
    // so it is placed again; a session whose harness is gone fails its input instead).
    const attached = new Promise<void>((resolve) =>
      ws.addEventListener("message", (e) => {
        const m = JSON.parse(e.data as string) as { t: string; session?: string };
        if (m.t === "attach" && m.session!.startsWith(s.id)) resolve();
      }),
    );
    await withTimeout(attached, 5_000, "the handed-back session's attach");
    ws.close();
  });

  it("a message to a session whose harness is no longer configured is 422, and the input it held waiting fails with the cause", async () => {
    const s = await createSession();
    const held = await message(s.id); // no runner-host: it waits in the pool
    expect(held.status).toBe(202);
    const heldId = ((await held.json()) as { id: string }).id;
    // As after a deploy that removed the harness; no alarm left to move anything on by itself.
    await runInDurableObject(sessionStub(s.id), async (_, state) => {
      new SessionState(state.storage).set({ harness: "retired" });
      await state.storage.deleteAlarm();
    });
    const r = await message(s.id);
    expect(r.status).toBe(422);
    expect(((await r.json()) as { error: { message: string } }).error.message).toBe('harness "retired" is no longer configured: the session cannot run');
    const events = ((await (await api(`/sessions/${s.id}/events`)).json()) as { events: { type: string; input_id?: string; data: Record<string, unknown> }[] }).events;
    expect(events.map((e) => [e.type, e.data.status ?? e.data.code ?? null, e.input_id ?? null])).toEqual([
      ["user.message", null, null],
      ["session.status", "running", heldId],
      ["session.error", "service_error", heldId],
      ["session.status", "failed", null],
    ]);
  });

  it("accepts when a full runner-host has an idle session it can drop", async () => {
    const ws = await connectRunner({ capacity: { loaded: 1, loaded_limit: 1, idle: 1 } });
    const s = await createSession();
    expect((await message(s.id)).status).toBe(202);
    ws.close();
  });

  it("a status the runner-host took before an attach order reached it does not free that order's room again", async () => {
    const ws = await connectRunner({ capacity: { loaded: 0, loaded_limit: 1, idle: 0 } });
    const attached = new Promise<void>((resolve) => ws.addEventListener("message", (e) => JSON.parse(e.data as string).t === "attach" && resolve()));
    const [a, b] = [await createSession(), await createSession()];
    expect((await message(a.id)).status).toBe(202);
    await withTimeout(attached, 5_000, "A's attach");
    // Handed to the pool directly, so each is taken before the next message is sent.
    const status = (attaches: number, loaded: number) =>
      runInDurableObject(env.RUNNERS.getByName(POOL_NAME), async (pool: RunnerPool, state) => {
        const control = state.getWebSockets("control")[0]!;
        await pool.webSocketMessage(control, JSON.stringify({ t: "status", draining: false, capacity: { loaded, loaded_limit: 1, idle: 0 }, attaches }));
      });
    await status(0, 0); // taken before A's order arrived: the pool still counts A
    expect((await message(b.id)).status).toBe(429);
    await status(1, 1);
    expect((await message(b.id)).status).toBe(429);
    await status(1, 0); // A let go: room again
    expect((await message(b.id)).status).toBe(202);
    ws.close();
  });

  it("a message the session refuses takes no room: the next session's message is placed", async () => {
    const ws = await connectRunner({ capacity: { loaded: 0, loaded_limit: 1, idle: 0 } });
    const [a, b] = [await createSession(), await createSession()];
    const steer = await api(`/sessions/${a.id}/events`, { method: "POST", body: JSON.stringify({ type: "user.message", text: "hi", delivery: "steer" }) });
    expect(steer.status).toBe(422);
    expect((await message(b.id)).status).toBe(202);
    ws.close();
  });

  it("messages sent together to one unplaced session share its placement's answer: all 429 when no room, all accepted (one attach) when there is", async () => {
    const full = await connectRunner({ capacity: { loaded: 1, loaded_limit: 1, idle: 0 } });
    const a = await createSession();
    expect((await Promise.all([1, 2, 3].map(() => message(a.id)))).map((r) => r.status)).toEqual([429, 429, 429]);
    expect(((await (await api(`/sessions/${a.id}/events`)).json()) as { events: unknown[] }).events).toHaveLength(0);
    full.close();
    const roomy = await connectRunner({ capacity: { loaded: 0, loaded_limit: 10, idle: 0 }, runnerId: "d".repeat(32) });
    const attaches: string[] = [];
    roomy.addEventListener("message", (e) => {
      const m = JSON.parse(e.data as string) as { t: string; session?: string };
      if (m.t === "attach") attaches.push(m.session!);
    });
    const b = await createSession();
    expect((await Promise.all([1, 2, 3].map(() => message(b.id)))).map((r) => r.status)).toEqual([202, 202, 202]);
    const c = await createSession();
    const placed = new Promise<void>((resolve) => roomy.addEventListener("message", (e) => (e.data as string).includes(c.id) && resolve()));
    expect((await message(c.id)).status).toBe(202);
    await withTimeout(placed, 5_000, "the sentinel's attach");
    expect(attaches.filter((x) => x.startsWith(b.id))).toHaveLength(1);
    roomy.close();
  });

  // The runner-host's own status after an attach comes later than these sends: the pool's count
  // alone must hold the limit.
  for (const capacity of [
    { loaded: 0, loaded_limit: 1, idle: 0 },
    { loaded: 1, loaded_limit: 1, idle: 1 },
  ]) {
    it(`messages racing for the last room at limits.loaded (${JSON.stringify(capacity)}): one is accepted and placed, the others get 429`, async () => {
      const ws = await connectRunner({ capacity });
      const attached: string[] = [];
      ws.addEventListener("message", (e) => {
        const m = JSON.parse(e.data as string) as { t: string; session?: string };
        if (m.t === "attach") attached.push(m.session!.split(":")[0]!);
      });
      const sessions = await Promise.all([1, 2, 3].map(() => createSession()));
      const answers = await Promise.all(sessions.map(async (s) => ({ id: s.id, status: (await message(s.id)).status })));
      expect(answers.map((a) => a.status).sort()).toEqual([202, 429, 429]);
      const accepted = answers.find((a) => a.status === 202)!.id;
      for (const a of answers.filter((a) => a.status === 429)) {
        const events = (await (await api(`/sessions/${a.id}/events`)).json()) as { events: unknown[] };
        expect(events.events).toHaveLength(0);
      }
      // The refused ones were not parked either: a runner-host with room gets only the accepted one.
      const roomy = await connectRunner({ capacity: { loaded: 0, loaded_limit: 10, idle: 0 }, runnerId: "c".repeat(32) });
      const later: string[] = [];
      roomy.addEventListener("message", (e) => {
        const m = JSON.parse(e.data as string) as { t: string; session?: string };
        if (m.t === "attach") later.push(m.session!.split(":")[0]!);
      });
      const sentinel = await createSession();
      const placed = new Promise<void>((resolve) => roomy.addEventListener("message", (e) => (e.data as string).includes(sentinel.id) && resolve()));
      expect((await message(sentinel.id)).status).toBe(202);
      await withTimeout(placed, 5_000, "the sentinel's attach");
      expect(attached).toEqual([accepted]);
      expect(later).toEqual([sentinel.id]);
      ws.close();
      roomy.close();
    });
  }
});
