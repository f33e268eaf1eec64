/**
 * The session's timestamps (src/session/clock.ts): kept by the millisecond, so a stamp is never
 * one of another millisecond.
 */
import { afterEach, expect, it, vi } from "vitest";
import { now } from "../../src/session/clock.ts";

afterEach(() => {
  vi.useRealTimers();
});

it("stamps the current millisecond in ISO 8601, and a new one as soon as the clock moves either way", () => {
  vi.useFakeTimers({ toFake: ["Date"] });
  const t = Date.UTC(2026, 0, 2, 3, 4, 5, 6);
  vi.setSystemTime(t);
  expect([now(), now()]).toEqual(["2026-01-02T03:04:05.006Z", "2026-01-02T03:04:05.006Z"]);
  vi.setSystemTime(t + 1);
  expect(now()).toBe("2026-01-02T03:04:05.007Z");
  vi.setSystemTime(t);
  expect(now()).toBe("2026-01-02T03:04:05.006Z");
});
