/**
 * The requests a shutdown lets finish (src/http/in-flight.ts; docs/api.md "Shutdown and
 * readiness"): `settled` answers once the last one is over, or after its bound with how many are left.
 */
import { describe, expect, it } from "vitest";
import { InFlight } from "../../src/http/in-flight.ts";

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("requests in flight at shutdown", () => {
  it("settled waits for the last request in flight, and answers at once when none is", async () => {
    const f = new InFlight();
    expect(await f.settled(60_000)).toEqual({ left: 0 });
    const a = deferred();
    const b = deferred();
    const first = f.track(() => a.promise);
    const second = f.track(() => b.promise.then(() => "answered"));
    expect(f.size).toBe(2);
    let settled = false;
    const waiting = f.settled(60_000).then((r) => ((settled = true), r));
    a.resolve();
    await first;
    expect(settled).toBe(false);
    b.resolve();
    expect(await second).toBe("answered");
    expect(await waiting).toEqual({ left: 0 });
    expect(f.waiting).toBe(0);
  });

  it("a request that fails still ends; one that never ends is counted as left after the bound", async () => {
    const f = new InFlight();
    await expect(f.track(() => Promise.reject(new Error("refused")))).rejects.toThrow("refused");
    expect(f.size).toBe(0);
    void f.track(() => new Promise(() => {}));
    expect(await f.settled(20)).toEqual({ left: 1 });
    expect(f.waiting).toBe(0); // a wait that ran out leaves nothing behind
  });
});
