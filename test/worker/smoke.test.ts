import { exports } from "cloudflare:workers";
import { expect, it } from "vitest";
it("answers", async () => {
  const r = await exports.default.fetch("http://x/");
  expect(await r.text()).toBe("ok");
});
