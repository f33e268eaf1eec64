/**
 * The object's parser of runner-link up frames: a lone well-formed `delta` skips zod, and must
 * accept exactly what LinkUpSchema accepts; everything else goes through the schema.
 */
import { describe, expect, it } from "vitest";
import { LinkUpSchema, parseLinkUp } from "../../src/shared/runner-protocol.ts";

const TURN = "0123456789abcdef0123456789abcdef";

/** Parses `v` both ways: both must reach `valid`, and agree on the value. */
const agrees = (v: unknown, valid: boolean) => {
  const text = JSON.stringify(v);
  const fast = parseLinkUp(text);
  const schema = LinkUpSchema.safeParse(v);
  expect(schema.success).toBe(valid);
  expect(fast.success).toBe(valid);
  if (fast.success && schema.success) expect(fast.data).toEqual(schema.data);
};

describe("runner link up frames as the object parses them", () => {
  it("takes a lone delta as the schema does", () => {
    agrees({ t: "delta", turn: TURN, text: "Hello" }, true);
    agrees({ t: "delta", turn: TURN, text: "" }, true);
    agrees({ t: "delta", turn: TURN, text: "\u2028 \"quoted\" \n" }, true);
  });

  it("refuses every malformed delta as the schema does", () => {
    agrees({ t: "delta", turn: TURN, text: "x", extra: 1 }, false); // unknown field
    agrees({ t: "delta", turn: TURN.toUpperCase(), text: "x" }, false); // not a lowercase id
    agrees({ t: "delta", turn: TURN.slice(1), text: "x" }, false); // 31 characters
    agrees({ t: "delta", turn: TURN, text: 7 }, false);
    agrees({ t: "delta", turn: TURN }, false);
    agrees({ t: "delta", text: "x", seq: 1 }, false);
  });

  it("sends every other frame through the schema", () => {
    agrees({ t: "ack", down: 3 }, true);
    agrees({ t: "hello", down: 0 }, true);
    agrees({ t: "turn_end", seq: 4, turn: TURN, status: "completed" }, true);
    agrees({ t: "batch", msgs: [{ t: "delta", turn: TURN, text: "a" }, { t: "ack", down: 1 }] }, true);
    agrees({ t: "batch", msgs: [{ t: "delta", turn: TURN, text: "a" }] }, false); // fewer than two
    agrees({ t: "ack", up: 3 }, false); // the down-link's ack
    agrees({ t: "nope" }, false);
  });

  it("refuses text that is not one JSON value", () => {
    expect(parseLinkUp("{").success).toBe(false);
    expect(parseLinkUp(`${JSON.stringify({ t: "delta", turn: TURN, text: "x" })} {}`).success).toBe(false);
    expect(parseLinkUp("null").success).toBe(false);
  });
});
