/**
 * Readiness and shutdown in the Worker (docs/api.md "Shutdown and readiness"): ready only while
 * a runner-host that is not draining is connected; while every runner-host drains, new work gets
 * `429 overloaded` with `Retry-After: 1` and readiness `503`. The Worker reads these from a fleet
 * snapshot it reuses for `FLEET_CACHE_MS`; the tests move the clock past that instead of waiting.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { FLEET_CACHE_MS } from "../../src/runner/fleet.ts";
import { api, connectRunner, createBody } from "./helpers.ts";

const capacity = { loaded: 0, loaded_limit: 16, idle: 0 };


/** Lets the isolate's fleet snapshot expire, so the next request asks the pools again. */
function ageFleetSnapshot(): void {
  vi.setSystemTime(Date.now() + FLEET_CACHE_MS + 1);
}

describe("readiness and draining", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["Date"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("is not ready without a runner-host, and new work gets 429 while every runner-host drains", async () => {
    const none = await api("/health/ready", { token: "" });
    expect(none.status).toBe(503);
    expect(await none.json()).toEqual({ status: "not_ready" });

    const ws = await connectRunner({ capacity, draining: true });
    ageFleetSnapshot();
    const ready = await api("/health/ready", { token: "" });
    expect(ready.status).toBe(503);
    const create = await api("/sessions", { method: "POST", body: JSON.stringify(createBody()) });
    expect(create.status).toBe(429);
    expect(create.headers.get("Retry-After")).toBe("1");
    expect(((await create.json()) as { error: { code: string } }).error.code).toBe("overloaded");
    // Reads still work while draining.
    expect((await api("/sessions")).status).toBe(200);
    // Live is live.
    expect((await api("/health/live", { token: "" })).status).toBe(200);

    // A runner-host that is not draining makes the service ready again (its welcome means the
    // pool has recorded its hello).
    const fresh = await connectRunner({ capacity });
    ageFleetSnapshot();
    expect((await api("/health/ready", { token: "" })).status).toBe(200);
    fresh.close();
    ws.close();
  });
});
