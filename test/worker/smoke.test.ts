import { exports } from "cloudflare:workers";
import { expect, it } from "vitest";

it("answers GET /health/live with status ok through the Worker's own fetch", async () => {
  const r = await exports.default.fetch("http://x/health/live");
  expect(r.status).toBe(200);
  expect(await r.json()).toEqual({ status: "ok" });
});
