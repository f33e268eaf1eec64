/**
 * The object's parser of runner-link up frames: a lone well-formed `delta` skips zod, and must
 * accept exactly what LinkUpSchema accepts; everything else goes through the schema.
 */
import { describe, expect, it } from "vitest";
import { LinkUpSchema, parseLinkUp } from "../../src/shared/runner-protocol.ts";

const TURN = "0123456789abcdef0123456789abcdef";

const agrees = (v: unknown) => {
  const text = JSON.stringify(v);
  const fast = parseLinkUp(text);
  const schema = LinkUpSchema.safeParse(v);
  expect(fast.success).toBe(schema.success);
  if (fast.success && schema.success) expect(fast.data).toEqual(schema.data);
};

describe("runner link up frames as the object parses them", () => {
  it("takes a lone delta as the schema does", () => {
    agrees({ t: "delta", turn: TURN, text: "Hello" });
    agrees({ t: "delta", turn: TURN, text: "" });
    agrees({ t: "delta", turn: TURN, text: "\u2028 \"quoted\" \n" });
  });

  it("refuses every malformed delta as the schema does", () => {
    agrees({ t: "delta", turn: TURN, text: "x", extra: 1 }); // unknown field
    agrees({ t: "delta", turn: TURN.toUpperCase(), text: "x" }); // not a lowercase id
    agrees({ t: "delta", turn: TURN.slice(1), text: "x" }); // 31 characters
    agrees({ t: "delta", turn: TURN, text: 7 });
    agrees({ t: "delta", turn: TURN });
    agrees({ t: "delta", text: "x", seq: 1 });
  });

  it("sends every other frame through the schema", () => {
    agrees({ t: "ack", down: 3 });
    agrees({ t: "hello", down: 0 });
    agrees({ t: "turn_end", seq: 4, turn: TURN, status: "completed" });
    agrees({ t: "batch", msgs: [{ t: "delta", turn: TURN, text: "a" }, { t: "ack", down: 1 }] });
    agrees({ t: "nope" });
  });

  it("refuses text that is not one JSON value", () => {
    expect(parseLinkUp("{").success).toBe(false);
    expect(parseLinkUp(`${JSON.stringify({ t: "delta", turn: TURN, text: "x" })} {}`).success).toBe(false);
    expect(parseLinkUp("null").success).toBe(false);
  });
});
