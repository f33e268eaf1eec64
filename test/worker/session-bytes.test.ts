/**
 * `limits.session_bytes` (docs/configuration.md "Limits"): a session's event history plus native
 * state. The harness's native state (the checkpoint artifact) counts together with the event history: a send
 * near the limit is `429`, and a native append that would pass it is refused (the turn fails as a
 * local write failure) with nothing of it stored.
 */
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { parseHostConfig } from "../../src/shared/config-schema.ts";
import { EVENT_ENVELOPE_BYTES, SessionState } from "../../src/session/session-state.ts";
import { MAX_RECORD_BYTES } from "../../src/session/event-log.ts";
import { Turns } from "../../src/session/turns.ts";
import { freshSession, ok } from "./helpers.ts";

const MiB = 1024 * 1024;
const SESSION_BYTES = 16 * MiB; // the smallest value the configuration allows
const parsed = parseHostConfig({
  tokens: [{ token_env: "T", tenant: "acme" }],
  harnesses: { pi: { command: ["node"] } },
  limits: { session_bytes: SESSION_BYTES },
});
if (!parsed.ok) throw new Error(parsed.problems.join("; "));
const limits = parsed.config.limits;
const NOW = "2026-01-01T00:00:00.000Z";
/** A native record of about 1 MiB (the harness's records are opaque JSON objects). */
const record = (i: number) => ({ role: "assistant", i, text: "n".repeat(MiB) });

/** A new session with one running turn, inside its object. */
async function inRunningTurn(fn: (s: SessionState, turns: Turns, state: DurableObjectState) => void): Promise<void> {
  const { n, stub } = freshSession();
  ok(await stub.create(n));
  await runInDurableObject(stub, (_, state) => {
    const s = new SessionState(state.storage);
    const turns = new Turns(s);
    s.send({ type: "user.message", text: "grow" }, limits, NOW);
    expect(turns.start(NOW)).toBeDefined();
    // The running input the start keeps in memory is the table's.
    const fresh = state.storage.sql.exec("SELECT event_id, text, traceparent, accepted_at FROM inputs WHERE state = 'running'").toArray();
    expect([turns.running()]).toEqual(fresh);
    fn(s, turns, state);
  });
}

describe("limits.session_bytes counts native state with the event log", () => {
  it("a native append past the limit is refused and stores nothing; a send near it is 429", async () => {
    await inRunningTurn((s, turns, state) => {
      let seq = 1;
      // About 14 MiB of native state fits beside the small log (16 MiB less a 1 MiB reserve).
      for (; seq <= 14; seq++) turns.apply({ t: "native", seq, records: [record(seq)] }, NOW, SESSION_BYTES);
      const before = s.storedBytes();
      expect(before).toBeGreaterThan(14 * MiB);
      expect(() => turns.apply({ t: "native", seq, records: [record(seq)] }, NOW, SESSION_BYTES)).toThrow(/limits\.session_bytes/);
      expect(s.storedBytes()).toBe(before); // the refused append left nothing behind
      expect(state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM native").one().n).toBe(14);
      // The event log alone is tiny, yet the session is full: a new message is refused.
      expect(s.require().log_bytes).toBeLessThan(MiB);
      expect(() => s.send({ type: "user.message", text: "more" }, limits, NOW)).toThrow(expect.objectContaining({ code: "overloaded" }));
    });
  });

  it("the native byte total and last seq kept across appends equal a fresh read, after a refused append and a revert too", async () => {
    await inRunningTurn((s, turns, state) => {
      const summed = () => state.storage.sql.exec<{ b: number }>("SELECT COALESCE(SUM(bytes), 0) AS b FROM native").one().b;
      const last = () => state.storage.sql.exec<{ s: number | null }>("SELECT MAX(seq) AS s FROM native").one().s ?? 0;
      let seq = 1;
      for (; seq <= 3; seq++) turns.apply({ t: "native", seq, records: [{ role: "user", i: seq, text: "é".repeat(1000) }, { role: "assistant", i: seq }] }, NOW, SESSION_BYTES);
      expect(s.nativeBytes()).toBe(summed());
      expect(summed()).toBeGreaterThan(6000); // two bytes per "é": bytes, not characters
      expect([s.nativeSeq(), last()]).toEqual([6, 6]);
      expect(() => turns.apply({ t: "native", seq, records: [record(0), ...Array.from({ length: 16 }, (_, i) => record(i + 1))] }, NOW, SESSION_BYTES)).toThrow(/limits\.session_bytes/);
      expect(s.nativeBytes()).toBe(summed());
      expect(s.nativeSeq()).toBe(last());
      turns.revertNative();
      expect(s.nativeBytes()).toBe(summed());
      expect([s.nativeSeq(), last()]).toEqual([0, 0]); // no checkpoint yet: every record reverted
      turns.apply({ t: "native", seq: seq++, records: [{ role: "user", i: 0 }] }, NOW, SESSION_BYTES);
      expect([s.nativeSeq(), last()]).toEqual([1, 1]);
    });
  });

  it("a send is refused exactly past the edge: log and native state, every unfinished prompt again, this message twice (its event and its prompt), and one maximal record", async () => {
    const wide = parseHostConfig({ tokens: [{ token_env: "T", tenant: "acme" }], harnesses: { pi: { command: ["node"] } }, limits: { session_bytes: SESSION_BYTES, input_bytes: MiB } });
    if (!wide.ok) throw new Error(wide.problems.join("; "));
    const lim = wide.config.limits;
    await inRunningTurn((s, turns) => {
      for (let seq = 1; seq <= 10; seq++) turns.apply({ t: "native", seq, records: [record(seq)] }, NOW, SESSION_BYTES);
      const queued = "q".repeat(300_000);
      s.send({ type: "user.message", text: queued }, lim, NOW);
      // Unfinished: the running turn's prompt ("grow") and the queued one.
      const unfinished = "grow".length + queued.length;
      const envelope = JSON.stringify({ type: "user.message", text: "", delivery: "queue" }).length + EVENT_ENVELOPE_BYTES;
      const fits = Math.floor((SESSION_BYTES - s.storedBytes() - unfinished - envelope - MAX_RECORD_BYTES) / 2);
      expect(fits).toBeGreaterThan(0);
      expect(fits).toBeLessThan(MiB);
      const before = s.storedBytes();
      expect(() => s.send({ type: "user.message", text: "x".repeat(fits + 1) }, lim, NOW)).toThrow(expect.objectContaining({ code: "overloaded" }));
      expect(s.storedBytes()).toBe(before);
      expect(() => s.send({ type: "user.message", text: "x".repeat(fits) }, lim, NOW)).not.toThrow();
    });
  });

  it("says a shorter message may fit only while one can: at the edge where one character still fits, and one byte past it", async () => {
    // What a one-character message needs beside the stored bytes: its event, its prompt again, the
    // running turn's prompt ("grow") and one maximal record.
    const xNeed = JSON.stringify({ type: "user.message", text: "x", delivery: "queue" }).length + EVENT_ENVELOPE_BYTES + 1 + "grow".length + MAX_RECORD_BYTES;
    const padBytes = JSON.stringify({ role: "assistant", text: "" }).length;
    for (const over of [0, 1]) {
      await inRunningTurn((s, turns) => {
        let seq = 1;
        for (; seq <= 11; seq++) turns.apply({ t: "native", seq, records: [record(seq)] }, NOW, SESSION_BYTES);
        const pad = SESSION_BYTES - xNeed - s.storedBytes() - padBytes + over;
        turns.apply({ t: "native", seq, records: [{ role: "assistant", text: "n".repeat(pad) }] }, NOW, SESSION_BYTES);
        expect(s.storedBytes() + xNeed).toBe(SESSION_BYTES + over);
        if (over === 0) {
          expect(() => s.send({ type: "user.message", text: "xy" }, limits, NOW)).toThrow(/; a shorter one may still fit$/);
          expect(() => s.send({ type: "user.message", text: "x" }, limits, NOW)).not.toThrow();
        } else {
          expect(() => s.send({ type: "user.message", text: "x" }, limits, NOW)).toThrow(
            `the session's event log and native state are at their limit (limits.session_bytes ${SESSION_BYTES}): no message fits; restore an earlier checkpoint or start a new session`,
          );
        }
      });
    }
  });
});
