/**
 * The local stack runs the Worker in Miniflare with the settings in runner-host/worker-bundle.ts;
 * `wrangler deploy` and the workers test pool read wrangler.toml. Both must describe the same
 * Worker, or the local stack would test a runtime that is never deployed.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { experimental_readRawConfig } from "wrangler";
import { COMPATIBILITY_DATE, COMPATIBILITY_FLAGS, DURABLE_OBJECTS } from "../../runner-host/worker-bundle.ts";

const wranglerToml = fileURLToPath(new URL("../../wrangler.toml", import.meta.url));

describe("the local stack's Worker settings equal wrangler.toml", () => {
  const { rawConfig } = experimental_readRawConfig({ config: wranglerToml });

  it("uses the same compatibility date and flags", () => {
    expect(COMPATIBILITY_DATE).toBe(rawConfig.compatibility_date);
    expect([...COMPATIBILITY_FLAGS].sort()).toEqual([...(rawConfig.compatibility_flags ?? [])].sort());
  });

  it("binds the same Durable Object classes under the same names", () => {
    const deployed = Object.fromEntries((rawConfig.durable_objects?.bindings ?? []).map((b: { name: string; class_name: string }) => [b.name, b.class_name]));
    expect(deployed).toEqual({ ...DURABLE_OBJECTS });
  });
});
