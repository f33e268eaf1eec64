// Types the workers-pool tests see for `env` and `exports` from "cloudflare:workers".
declare namespace Cloudflare {
  interface Env extends Omit<import("../../src/env.ts").Env, never> {}
  interface GlobalProps {
    mainModule: typeof import("../../src/index.ts");
    durableNamespaces: "SessionObject" | "TenantObject" | "RunnerPool";
  }
}
