/**
 * Bearer tokens against the configuration a request runs under (src/http/auth.ts): a token's digest
 * is remembered between requests, its grant never is.
 */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { requireToken } from "../../src/http/auth.ts";
import type { AppEnv } from "../../src/http/context.ts";
import type { Grant, Runtime } from "../../src/runtime.ts";
import { ServiceError } from "../../src/shared/errors.ts";
import { sha256Hex } from "../../src/shared/ids.ts";

/** An app whose configuration (its grants by token digest) the test swaps between requests. */
function rig() {
  const r = { grants: new Map<string, Grant>() };
  const app = new Hono<AppEnv>();
  app.use(async (c, next) => {
    c.set("runtime", { grants: r.grants } as Runtime);
    await next();
  });
  app.use(requireToken);
  app.get("/", (c) => c.json(c.get("principal")));
  app.onError((e, c) => c.json({ code: (e as ServiceError).code }, (e as ServiceError).status as 401));
  const call = async (token: string) => {
    const res = await app.request("/", { headers: { Authorization: `Bearer ${token}` } });
    return { status: res.status, body: await res.json() };
  };
  return { r, call };
}

const grant = (manage: boolean): Grant => ({ tenant: "acme", manage, readOnly: false });

describe("bearer tokens", () => {
  it("grants a configured token on every request, and refuses it once the configuration no longer holds it", async () => {
    const { r, call } = rig();
    const token = `tok-${crypto.randomUUID()}`;
    r.grants = new Map([[await sha256Hex(token), grant(true)]]);
    expect(await call(token)).toEqual({ status: 200, body: grant(true) });
    expect(await call(token)).toEqual({ status: 200, body: grant(true) });
    r.grants = new Map();
    expect(await call(token)).toEqual({ status: 401, body: { code: "forbidden" } });
  });

  it("gives a token the grant its configuration holds now, not the one it had when first seen", async () => {
    const { r, call } = rig();
    const token = `tok-${crypto.randomUUID()}`;
    r.grants = new Map([[await sha256Hex(token), grant(true)]]);
    expect((await call(token)).body).toEqual(grant(true));
    r.grants = new Map([[await sha256Hex(token), grant(false)]]);
    expect((await call(token)).body).toEqual(grant(false));
  });

  it("refuses a token no configuration grants, however often it is sent", async () => {
    const { call } = rig();
    for (let i = 0; i < 3; i++) expect(await call("nobody")).toEqual({ status: 401, body: { code: "forbidden" } });
  });
});
