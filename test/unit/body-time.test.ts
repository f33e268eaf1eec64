/**
 * How long the service waits for a request body (src/http/body.ts, docs/api.md "Limits"): 15 s
 * without a byte, 120 s in all, each at its edge, on the clock the reader's timers run on.
 */
import type { Context } from "hono";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { BODY_STALL_MS, BODY_TOTAL_MS, readBody } from "../../src/http/body.ts";

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

/**
 * A chunked request whose body sends one byte every `everyMs` (`bytes` of them, then nothing) and
 * never ends; or, with `end`, ends after them.
 */
function trickle(everyMs: number, bytes = Infinity, end = false): Context {
  let timer: ReturnType<typeof setInterval> | undefined;
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      timer = setInterval(() => {
        if (sent < bytes) return void (sent++, controller.enqueue(new Uint8Array([0x20])));
        clearInterval(timer);
        if (end) controller.close();
      }, everyMs);
    },
    cancel: () => clearInterval(timer),
  });
  const raw = new Request("http://svc/sessions", { method: "POST", body, duplex: "half" } as RequestInit);
  return { req: { raw } } as unknown as Context;
}

/** The message readBody fails with, and when (ms on the fake clock). */
async function outcome(c: Context, advanceMs: number): Promise<{ message: string; at: number }> {
  const started = Date.now();
  let settled: { message: string; at: number } | undefined;
  readBody(c, 1_000_000).then(
    () => (settled = { message: "read", at: Date.now() - started }),
    (e: Error) => (settled = { message: e.message, at: Date.now() - started }),
  );
  for (let t = 0; t < advanceMs && !settled; t += 500) await vi.advanceTimersByTimeAsync(500);
  expect(settled, "readBody settled").toBeDefined();
  return settled!;
}

describe("request body time", () => {
  it("a body that goes 15 s without a byte is refused at 15 s, not before", async () => {
    const r = await outcome(trickle(60_000), 30_000);
    expect(r).toEqual({ message: `request body stalled: no bytes for ${BODY_STALL_MS / 1000} s`, at: BODY_STALL_MS });
  });

  it("the 15 s run from the last byte: bytes for 10 s, then none, is refused at 25 s", async () => {
    const r = await outcome(trickle(1_000, 10), 60_000);
    expect(r).toEqual({ message: `request body stalled: no bytes for ${BODY_STALL_MS / 1000} s`, at: 10_000 + BODY_STALL_MS });
  });

  it("a body that ends after gaps under 15 s is read whole, and no timer of it is left behind", async () => {
    const r = await outcome(trickle(14_000, 5, true), 200_000);
    expect(r).toEqual({ message: "read", at: 6 * 14_000 });
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a byte every 14.5 s never stalls, and the body is refused at 120 s in all", async () => {
    const r = await outcome(trickle(14_500), 200_000);
    expect(r).toEqual({ message: `request body too slow: not complete within ${BODY_TOTAL_MS / 1000} s`, at: BODY_TOTAL_MS });
  });
});
