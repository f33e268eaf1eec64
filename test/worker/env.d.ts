// Types the workers-pool tests see for `env` and `exports` from "cloudflare:workers".
declare namespace Cloudflare {
  interface Env extends import("../../src/env.ts").Env {}
  interface GlobalProps {
    mainModule: typeof import("../../src/index.ts");
    durableNamespaces: "SessionObject" | "TenantObject" | "RunnerPool";
  }
}
