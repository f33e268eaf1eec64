import type { Context } from "hono";
import type { Env } from "../env.ts";
import type { Grant, Runtime } from "../runtime.ts";

export type AppEnv = {
  Bindings: Env;
  Variables: { requestId: string; runtime: Runtime; principal: Grant };
};

export type AppContext = Context<AppEnv>;
