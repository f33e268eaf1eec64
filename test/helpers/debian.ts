/**
 * A Debian package a test or bench needs, installed on first use when missing (CI runs as root; a
 * developer without root gets an error naming the package instead).
 */
import { execFileSync } from "node:child_process";

/** Installs `pkg` unless `present()` already holds; afterwards it must hold. */
export function ensureDebianPackage(pkg: string, present: () => boolean): void {
  if (present()) return;
  if (process.getuid?.() !== 0) throw new Error(`Debian's ${pkg} package is missing; install it (apt-get install -y ${pkg})`);
  execFileSync("apt-get", ["update"], { stdio: "ignore" });
  execFileSync("apt-get", ["install", "-y", "--no-install-recommends", pkg], { stdio: "ignore", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  if (!present()) throw new Error(`apt-get installed ${pkg}, but it is still not usable`);
}
