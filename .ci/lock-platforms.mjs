#!/usr/bin/env node
// The registry these machines reach does not serve workerd's macOS and Windows binaries, so
// `npm install` leaves them out of package-lock.json, and `npm ci` then refuses the lock as out of
// sync ("Missing: @cloudflare/workerd-darwin-64@ from lock file"). This adds the missing optional
// platform entries (os/cpu-guarded, never installed on Linux) next to every workerd in the lock.
// Run it after any `npm install` that rewrites the lock: `node .ci/lock-platforms.mjs`.
import { readFileSync, writeFileSync } from "node:fs";

const path = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(path, "utf8"));
const PLATFORMS = {
  "@cloudflare/workerd-darwin-64": { os: ["darwin"], cpu: ["x64"] },
  "@cloudflare/workerd-darwin-arm64": { os: ["darwin"], cpu: ["arm64"] },
  "@cloudflare/workerd-linux-64": { os: ["linux"], cpu: ["x64"] },
  "@cloudflare/workerd-linux-arm64": { os: ["linux"], cpu: ["arm64"] },
  "@cloudflare/workerd-windows-64": { os: ["win32"], cpu: ["x64"] },
};
let added = 0;
for (const [key, entry] of Object.entries(lock.packages)) {
  if (!key.endsWith("node_modules/workerd") || !entry.optionalDependencies) continue;
  const parent = key.slice(0, -"workerd".length);
  for (const [name, version] of Object.entries(entry.optionalDependencies)) {
    const at = `${parent}${name}`;
    if (lock.packages[at] || !PLATFORMS[name]) continue;
    lock.packages[at] = { version, ...(entry.dev ? { dev: true } : {}), license: "Apache-2.0", optional: true, ...PLATFORMS[name], engines: { node: ">=16" } };
    added += 1;
  }
}
const sorted = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a < b ? -1 : a > b ? 1 : 0)));
lock.packages = sorted;
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`lock-platforms: added ${added} entries`);
