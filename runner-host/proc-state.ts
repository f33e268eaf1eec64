/**
 * A process's state letter from /proc (`R`, `S`, `Z`, …), or undefined when it cannot be read (the
 * process is gone, or there is no /proc). A zombie (`Z`) has exited and only waits to be reaped.
 */
import { readFileSync } from "node:fs";

export function procState(pid: number): string | undefined {
  try {
    return /^State:\s+(\S)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  } catch {
    return undefined;
  }
}
