/** `GET /catalog`: the host tools the caller's tenant may see; no urls, no credentials. */
import { Hono } from "hono";
import { refuseInspection, requireToken } from "../http/auth.ts";
import type { AppEnv } from "../http/context.ts";
import { descriptorOf } from "../session/create.ts";

export const catalog = new Hono<AppEnv>();

catalog.use("*", requireToken);

catalog.get("/", (c) => {
  refuseInspection(c.get("principal"));
  const tenant = c.get("principal").tenant;
  const tools = c.get("runtime").config.tools.filter((t) => t.tenants.includes(tenant)).map(descriptorOf);
  return c.json({ tools });
});
