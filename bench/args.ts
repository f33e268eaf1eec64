/**
 * Command-line sizes of a benchmark: `--<name> <number>` for each size, and `--short`, which swaps
 * every default for a small one so the whole bench finishes in seconds. Short runs prove that an
 * entry point still works end to end (CI runs each one); their figures mean nothing.
 */
import { parseArgs } from "node:util";

export function benchArgs<K extends string>(full: Record<K, number>, short: Record<K, number>): Record<K, number> & { short: boolean } {
  const names = Object.keys(full) as K[];
  const options = Object.fromEntries([...names.map((n) => [n, { type: "string" }]), ["short", { type: "boolean", default: false }]]);
  const { values } = parseArgs({ options: options as Record<string, { type: "string" | "boolean" }> });
  const isShort = values.short === true;
  const sizes = Object.fromEntries(
    names.map((n) => {
      const given = values[n];
      const value = typeof given === "string" ? Number(given) : (isShort ? short : full)[n];
      if (!Number.isFinite(value) || value <= 0) throw new Error(`--${n} must be a positive number, got ${JSON.stringify(given)}`);
      return [n, value];
    }),
  ) as Record<K, number>;
  return { ...sizes, short: isShort };
}
