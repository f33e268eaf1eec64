/**
 * Debian Chromium for the browser tests, installed on first use when missing (CI runs as root):
 * `apt-get update && apt-get install -y chromium`. Launched headless with a fresh, empty profile
 * and no background traffic, driven by playwright-core.
 */
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type BrowserContext } from "playwright-core";
import { ensureDebianPackage } from "./debian.ts";

export const CHROMIUM = "/usr/bin/chromium";

export function ensureChromium(): void {
  ensureDebianPackage("chromium", () => existsSync(CHROMIUM));
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
