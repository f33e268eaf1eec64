/**
 * The runner-host's id: 32 hex, generated once and kept under `data_dir`, so the pool recognises
 * the same machine across restarts (its `boot` changes instead).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ID_PATTERN, newId } from "../../src/shared/ids.ts";

export function persistedRunnerId(dataDir: string): string {
  const file = path.join(dataDir, "runner-id");
  if (existsSync(file)) {
    const id = readFileSync(file, "utf8").trim();
    if (ID_PATTERN.test(id)) return id;
  }
  const id = newId();
  writeFileSync(file, `${id}\n`);
  return id;
}
