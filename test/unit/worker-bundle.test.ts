/**
 * What the Worker bundle carries. zod's `z` named export is a namespace object holding the whole
 * library, its ~60 error-message locales included, so one `import { z } from "zod"` anywhere in
 * the Worker's graph put ~560 KiB into the bundle (1,373 → 809 KiB deployed; docs/design-notes.md
 * "Dependencies"). `import * as z from "zod"` lets esbuild (and wrangler's bundler) keep only what
 * is used; English stays, registered when the first schema is built.
 */
import { describe, expect, it } from "vitest";
import { bundleWorker } from "../../runner-host/cli/worker-bundle.ts";

describe("the Worker bundle", () => {
  it("carries zod's English messages and none of its other locales", async () => {
    const script = await bundleWorker();
    // esbuild marks each module's code in an unminified bundle with its path.
    const locales = [...script.matchAll(/^\/\/ node_modules\/zod\/v4\/locales\/([\w-]+)\.js$/gm)].map((m) => m[1]);
    expect(locales).toEqual(["en"]);
    expect(script.length).toBeLessThan(1024 * 1024);
  });
});
