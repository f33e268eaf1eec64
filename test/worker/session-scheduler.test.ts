/**
 * What a committed change waits for before it is answered (src/session/scheduler.ts): persistence
 * noting it always, the tenant index only for an urgent change (a create, close, resume, …);
 * a message's turn starting or ending is for a list, which the TenantObject gathers a moment later.
 */
import { describe, expect, it } from "vitest";
import type { Event } from "../../src/shared/api-schema.ts";
import type { Runtime } from "../../src/runtime.ts";
import { Scheduler, type SchedulerParts } from "../../src/session/scheduler.ts";
import type { LoggedEvent } from "../../src/session/event-log.ts";
import { sessionRow } from "../unit/session-row.ts";

const event: Event = { id: "0".repeat(32), type: "session.status", time: "2026-01-01T00:00:00.000Z", data: { status: "idle" } };
const logged: LoggedEvent = { seq: 1, event, endOffset: 120, bytes: 120 };

/** A closed session (nothing to schedule) whose index push never lands. */
function rig() {
  const r = { pushes: [] as boolean[], noted: 0 };
  const row = sessionRow({ status: "closed" });
  const parts = {
    state: { row: () => row, require: () => row },
    publication: { publish: () => {} },
    index: {
      push: (urgent = false) => (r.pushes.push(urgent), new Promise<void>(() => {})),
      pushInBackground: () => void r.pushes.push(false),
    },
    changed: async () => void r.noted++,
    runtime: async () => ({}) as Runtime,
  } as unknown as SchedulerParts;
  return { r, scheduler: new Scheduler(parts) };
}

/** Settles within a few turns of the event loop, or says it did not. */
async function settles(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setTimeout(resolve, 0));
  return done;
}

describe("a committed change and the tenant index", () => {
  it("answers a change nobody waits on without waiting for its index push, which still goes", async () => {
    const { r, scheduler } = rig();
    const answered = scheduler.commit(false, () => ({ events: [logged], value: "sent" }));
    expect(await settles(answered)).toBe(true);
    expect(await answered).toEqual({ ok: true, value: "sent" });
    expect(r).toEqual({ pushes: [false], noted: 1 });
  });

  it("answers an urgent change only once its index push has landed", async () => {
    const { r, scheduler } = rig();
    expect(await settles(scheduler.commit(true, () => ({ events: [logged], value: "closed" })))).toBe(false);
    expect(r).toEqual({ pushes: [true], noted: 1 });
  });
});
