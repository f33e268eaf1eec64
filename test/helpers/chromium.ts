/**
 * Debian Chromium for the browser tests, installed on first use when missing (CI runs as root):
 * `apt-get update && apt-get install -y chromium`. Launched headless with a fresh, empty profile
 * and no background traffic, driven by playwright-core.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type BrowserContext } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

export function ensureChromium(): void {
  if (existsSync(CHROMIUM)) return;
  if (process.getuid?.() !== 0) throw new Error(`${CHROMIUM} is missing; install Debian's chromium package (apt-get install -y chromium)`);
  execFileSync("apt-get", ["update"], { stdio: "ignore" });
  execFileSync("apt-get", ["install", "-y", "--no-install-recommends", "chromium"], { stdio: "ignore", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
}

/** A browser on a new empty `--user-data-dir` (playwright passes the directory itself). */
export async function launchChromium(): Promise<BrowserContext> {
  ensureChromium();
  const profile = mkdtempSync(path.join(tmpdir(), "svc-chromium-"));
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
}
