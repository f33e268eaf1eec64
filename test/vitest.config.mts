import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const root = fileURLToPath(new URL("..", import.meta.url));

// Three projects: pure logic in Node (`unit`), objects in workerd (`worker`), and the real local
// stack driven over HTTP (`e2e`). Run all with `npm test`; one with `--project <name>`.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          root,
          include: ["test/unit/**/*.test.ts"],
          environment: "node",
          testTimeout: 20_000,
        },
      },
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: `${root}/wrangler.toml` },
            miniflare: { bindings: { SVC_TEST: "1" } },
          }),
        ],
        test: {
          name: "worker",
          root,
          include: ["test/worker/**/*.test.ts"],
          setupFiles: ["test/worker/setup.ts"],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: "e2e",
          root,
          include: ["test/e2e/**/*.test.ts"],
          environment: "node",
          testTimeout: 60_000,
          hookTimeout: 60_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
