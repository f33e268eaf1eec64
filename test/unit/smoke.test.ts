import { expect, it } from "vitest";
import { newId } from "../../src/shared/ids.ts";
it("makes ids", () => expect(newId()).toMatch(/^[0-9a-f]{32}$/));
