#!/usr/bin/env node
// The registry these machines reach does not serve some native packages' macOS, Windows and other
// platform binaries, so `npm install` leaves them out of package-lock.json, and `npm ci` then refuses
// the lock as out of sync ("Missing: @cloudflare/workerd-darwin-64@ from lock file"). This adds the
// missing optional platform entries (os/cpu-guarded, never installed on Linux x64) next to every
// package below that lists them: workerd, and tailwind's oxide (pulled in by the LangGraph dev
// server the benches compare against).
// Run it after any `npm install` that rewrites the lock: `node .ci/lock-platforms.mjs`.
import { readFileSync, writeFileSync } from "node:fs";

const path = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(path, "utf8"));
/** Package → its platform packages' os/cpu (as each publishes them), license and engines. */
const NATIVE = {
  workerd: {
    license: "Apache-2.0",
    engines: { node: ">=16" },
    platforms: {
      "@cloudflare/workerd-darwin-64": { os: ["darwin"], cpu: ["x64"] },
      "@cloudflare/workerd-darwin-arm64": { os: ["darwin"], cpu: ["arm64"] },
      "@cloudflare/workerd-linux-64": { os: ["linux"], cpu: ["x64"] },
      "@cloudflare/workerd-linux-arm64": { os: ["linux"], cpu: ["arm64"] },
      "@cloudflare/workerd-windows-64": { os: ["win32"], cpu: ["x64"] },
    },
  },
  "@tailwindcss/oxide": {
    license: "MIT",
    engines: { node: ">= 20" },
    platforms: {
      "@tailwindcss/oxide-android-arm64": { os: ["android"], cpu: ["arm64"] },
      "@tailwindcss/oxide-darwin-arm64": { os: ["darwin"], cpu: ["arm64"] },
      "@tailwindcss/oxide-darwin-x64": { os: ["darwin"], cpu: ["x64"] },
      "@tailwindcss/oxide-freebsd-x64": { os: ["freebsd"], cpu: ["x64"] },
      "@tailwindcss/oxide-linux-arm-gnueabihf": { os: ["linux"], cpu: ["arm"] },
      "@tailwindcss/oxide-wasm32-wasi": { cpu: ["wasm32"] },
      "@tailwindcss/oxide-win32-arm64-msvc": { os: ["win32"], cpu: ["arm64"] },
      "@tailwindcss/oxide-win32-x64-msvc": { os: ["win32"], cpu: ["x64"] },
    },
  },
};
let added = 0;
for (const [key, entry] of Object.entries(lock.packages)) {
  const pkg = Object.keys(NATIVE).find((p) => key.endsWith(`node_modules/${p}`));
  if (!pkg || !entry.optionalDependencies) continue;
  const { license, engines, platforms } = NATIVE[pkg];
  const parent = key.slice(0, -pkg.length);
  for (const [name, version] of Object.entries(entry.optionalDependencies)) {
    const at = `${parent}${name}`;
    if (lock.packages[at] || !platforms[name]) continue;
    lock.packages[at] = { version, ...(entry.dev ? { dev: true } : {}), license, optional: true, ...platforms[name], engines };
    added += 1;
  }
}
const sorted = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a < b ? -1 : a > b ? 1 : 0)));
lock.packages = sorted;
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`lock-platforms: added ${added} entries`);
