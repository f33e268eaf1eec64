/** `GET /openapi.json`: the published contract, public like health. Built once per isolate. */
import { Hono } from "hono";
import type { AppEnv } from "../http/context.ts";
import { openApiText } from "../shared/openapi.ts";

export const openapi = new Hono<AppEnv>();

let text: string | undefined;

openapi.get("/openapi.json", (c) => {
  text ??= openApiText();
  return c.body(text, 200, { "Content-Type": "application/json" });
});
