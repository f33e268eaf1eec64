/**
 * The host configuration built into the Worker bundle by `svc deploy`
 * (runner-host/cli/deploy/deploy-command.ts).
 * The deploy writes a small entry module that installs the file's text here and re-exports
 * src/index.ts, so a configuration of any size up to its 4 MiB limit reaches the Worker without a
 * variable (Workers variables and secrets hold at most 5 KB each). The local stack and the tests
 * install nothing and bind `HOST_CONFIG` instead.
 */
export type BundledConfig = {
  /** The host configuration file's text, exactly as checked before the deploy. */
  text: string;
  /**
   * `token_env` → SHA-256 (hex) of that token's secret, for tokens deployed as digests
   * (`svc deploy -token-digests`): they need no Worker secret, which keeps a deployment with many
   * tenants under the platform's cap on secrets and variables per Worker.
   */
  tokenDigests: Record<string, string>;
};

let bundled: BundledConfig | undefined;

/**
 * Called once by the generated deploy entry, at module evaluation, before any request (tests
 * install one and then `undefined` to fall back to `HOST_CONFIG` again).
 */
export function installBundledConfig(b: BundledConfig | undefined): void {
  bundled = b;
}

export function bundledConfig(): BundledConfig | undefined {
  return bundled;
}
