/**
 * Native state reaches the harness in pieces that respect its `max_line_bytes` (svc-harness/1
 * `state_part`): a state larger than one line is re-opened intact, and nothing on the way is a
 * framing violation for the other sessions of the process.
 */
import { describe, expect, it } from "vitest";
import { HarnessError } from "../../runner-host/harness/harness-process.ts";
import { DEFAULT_MAX_LINE_BYTES } from "../../runner-host/harness/jsonl.ts";
import { STATE_FORMAT, type CommandInput, type NativeRecord } from "../../runner-host/harness/protocol.ts";
import { planOpen } from "../../runner-host/harness/state-parts.ts";
import { initCommand, ok, startHarness } from "./harness-helpers.ts";

const MiB = 1024 * 1024;
/** A pi-agent-core user message of about `size` bytes of text. */
const userRecord = (i: number, size: number): NativeRecord => ({ role: "user", content: `${i}:${"x".repeat(size)}`, timestamp: i });
const open = (session: string, records: NativeRecord[]): CommandInput<"open"> => ({
  op: "open",
  session,
  model: "openai/gpt-4o-mini",
  tools: [],
  state: { format: STATE_FORMAT, v: 1, records },
});
const lineBytes = (c: object) => Buffer.byteLength(JSON.stringify({ id: "c123456", ...c }), "utf8");

describe("planOpen", () => {
  it("sends a state that fits in the open itself", () => {
    const cmd = open("s", [userRecord(0, 100)]);
    expect(planOpen(cmd, 4096)).toEqual({ parts: [], open: cmd });
  });

  it("splits a larger state into state_part lines within the limit, in order, with an empty open", () => {
    const records = Array.from({ length: 40 }, (_, i) => userRecord(i, 200 + i * 13));
    const plan = planOpen(open("s", records), 2048);
    if ("error" in plan) throw new Error(plan.error);
    expect(plan.parts.length).toBeGreaterThan(3);
    for (const p of plan.parts) expect(lineBytes(p)).toBeLessThanOrEqual(2048);
    expect(plan.parts.flatMap((p) => p.records)).toEqual(records);
    expect(plan.open.state?.records).toEqual([]);
    expect(lineBytes(plan.open)).toBeLessThanOrEqual(2048);
  });

  it("refuses (for this session only) a single record that no line can carry", () => {
    const plan = planOpen(open("s", [userRecord(0, 10), userRecord(1, 5000)]), 2048);
    expect(plan).toEqual({ error: expect.stringMatching(/native state record 1 \(\d+ bytes\) needs a \d+-byte state_part line, over the harness's line limit \(2048 bytes\)/) });
  });
});

describe("the reference harness re-opens native state larger than one line", () => {
  it("a 12 MiB state arrives in pieces; another session in the same process keeps working", async () => {
    const { hp } = await startHarness();
    try {
      await ok(hp, initCommand("http://127.0.0.1:9/v1"));
      await ok(hp, { op: "open", session: "other", model: "openai/gpt-4o-mini", tools: [] });
      const records = Array.from({ length: 12 }, (_, i) => userRecord(i, MiB));
      const whole = open("big", records);
      expect(lineBytes(whole)).toBeGreaterThan(hp.ready.max_line_bytes);
      // Sent whole it would be refused before it reached the harness: only this request fails.
      await expect(hp.request(whole)).rejects.toMatchObject({ code: "too_large" } satisfies Partial<HarnessError>);

      const plan = planOpen(whole, hp.maxLineBytes);
      if ("error" in plan) throw new Error(plan.error);
      expect(plan.parts.length).toBeGreaterThanOrEqual(2);
      for (const p of plan.parts) await ok(hp, p);
      expect(await ok(hp, plan.open)).toMatchObject({ records: 12 });
      expect(await ok(hp, { op: "ping" })).toEqual({ sessions: 2, running: 0 });
      expect(hp.exitInfo).toBeUndefined();
    } finally {
      await hp.kill();
    }
  });

  it("an open nesting past the protocol's 128 levels (a record stored before the bound) is refused before it reaches the harness", async () => {
    const { hp } = await startHarness();
    try {
      await ok(hp, initCommand("http://127.0.0.1:9/v1"));
      // The record sits at the open line's level 4: 125 levels fit, 126 do not.
      const deep = (levels: number): NativeRecord => {
        let d: unknown = 1;
        for (let i = 0; i < levels - 1; i++) d = { a: d };
        return { role: "user", content: "deep", timestamp: 1, d };
      };
      await expect(hp.request(open("deep", [deep(126)]))).rejects.toMatchObject({ code: "too_large", message: "open nests deeper than 128 levels, the protocol's bound" });
      expect(await ok(hp, open("fits", [deep(125)]))).toMatchObject({ records: 1 });
      expect(hp.exitInfo).toBeUndefined();
    } finally {
      await hp.kill();
    }
  });

  it("state parts are consumed by the next open, and dropped by a detach before it", async () => {
    const { hp } = await startHarness();
    try {
      await ok(hp, initCommand("http://127.0.0.1:9/v1"));
      await ok(hp, { op: "state_part", session: "s", records: [userRecord(0, 10)] });
      await ok(hp, { op: "detach", session: "s" });
      expect(await ok(hp, open("s", [userRecord(1, 10)]))).toMatchObject({ records: 1 });
      await expect(hp.request({ op: "state_part", session: "s", records: [userRecord(2, 10)] })).resolves.toMatchObject({ ok: false, error: { code: "conflict" } });
      expect(DEFAULT_MAX_LINE_BYTES).toBe(hp.ready.max_line_bytes);
    } finally {
      await hp.kill();
    }
  });
});
