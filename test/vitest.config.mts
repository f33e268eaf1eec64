import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const root = fileURLToPath(new URL("..", import.meta.url));

// Five projects: pure logic in Node (`unit`), objects in workerd (`worker`), the real local stack
// driven over HTTP (`e2e`, with the short chaos run), generated malformed requests against it
// (`fuzz`, a 1,000-request slice; `npm run fuzz` runs 10,000), and every bench entry point in its
// short mode (`bench`). Run all with `npm test`; one with `--project <name>`.
export default defineConfig({
  test: {
    // Two files at a time (Vitest's default on two cores is one): an e2e file mostly waits on its
    // stack, so two stacks, or a stack and a unit file, share the cores. The bench project runs
    // alone after them (`fileParallelism: false`): its short runs load both cores.
    maxWorkers: 2,
    projects: [
      {
        test: {
          name: "unit",
          root,
          globalSetup: ["test/build-harness.setup.ts"],
          include: ["test/unit/**/*.test.ts"],
          environment: "node",
          // Harness users of their own (as root) from a range no e2e stack running beside uses: a
          // test that checks nothing runs as a released id must not see a stack's next process.
          env: { SVC_HARNESS_UIDS: "200000-249999" },
          // s3rver encrypts its ListObjectsV2 continuation tokens with DES, which OpenSSL 3 keeps in
          // its legacy provider: without it a listing of more than one page answers 500.
          execArgv: ["--openssl-legacy-provider"],
          testTimeout: 20_000,
        },
      },
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: `${root}/wrangler.toml` },
            // Test bindings: a host config with small limits for edge tests, and the secrets it names.
            miniflare: {
              bindings: {
                HOST_CONFIG: JSON.stringify({
                  tokens: [
                    { token_env: "TOKEN_MANAGE", tenant: "acme", manage: true },
                    { token_env: "TOKEN_READ", tenant: "acme", read_only: true },
                    { token_env: "TOKEN_OTHER", tenant: "other", manage: true },
                  ],
                  harnesses: { pi: { command: ["node", "harness.js"] } },
                  providers: {
                    openai: { api_key_env: "OPENAI_API_KEY" },
                    empty: { api_key_env: "EMPTY_API_KEY" },
                  },
                  limits: { queue: 3, input_bytes: 1024, subscribers: 2, subscriber_events: 2, subscriber_bytes: 4096 },
                }),
                TOKEN_MANAGE: "manage-secret-0123456789abcdef",
                TOKEN_READ: "read-only-secret-0123456789abcdef",
                TOKEN_OTHER: "other-tenant-secret-0123456789abcdef",
                OPENAI_API_KEY: "sk-test-openai",
                EMPTY_API_KEY: "",
              },
            },
          }),
        ],
        test: {
          name: "worker",
          root,
          include: ["test/worker/**/*.test.ts"],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: "fuzz",
          root,
          globalSetup: ["test/build-harness.setup.ts"],
          include: ["test/fuzz/**/*.test.ts"],
          environment: "node",
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: "e2e",
          root,
          globalSetup: ["test/build-harness.setup.ts"],
          // test/chaos: the short chaos run (the full one is `npm run chaos`).
          include: ["test/e2e/**/*.test.ts", "test/chaos/**/*.test.ts"],
          setupFiles: ["test/e2e/setup.ts"],
          environment: "node",
          // As in `unit`: s3rver's continuation tokens (a bucket listed past one page) need DES.
          execArgv: ["--openssl-legacy-provider"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: "bench",
          root,
          globalSetup: ["test/build-harness.setup.ts"],
          include: ["test/bench/**/*.test.ts"],
          environment: "node",
          fileParallelism: false,
        },
      },
    ],
  },
});
