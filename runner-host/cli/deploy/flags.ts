/**
 * Go-style flags for the `svc` subcommands that came after the first (`deploy`, `secrets`,
 * `runner-config`): one or two dashes, `-name value` or `-name=value`, booleans without a value (or
 * `=true` / `=false`), and `--` ending the flags (what follows is passed on untouched).
 */
export type FlagKinds = Record<string, "string" | "boolean">;
export type Flags = Record<string, string | boolean | undefined>;
export type ParsedFlags = { ok: true; flags: Flags; rest: string[] } | { ok: false; help: boolean; problem?: string };

export function parseFlags(argv: readonly string[], kinds: FlagKinds): ParsedFlags {
  const flags: Flags = {};
  const args = [...argv];
  while (args.length > 0) {
    const arg = args.shift()!;
    if (arg === "--") return { ok: true, flags, rest: args };
    const m = /^--?([^=-][^=]*)(?:=(.*))?$/s.exec(arg);
    if (!m) return { ok: false, help: false, problem: `unexpected argument ${JSON.stringify(arg)}` };
    const [, name, inline] = m as unknown as [string, string, string | undefined];
    if (name === "h" || name === "help") return { ok: false, help: true };
    const kind = Object.hasOwn(kinds, name) ? kinds[name] : undefined;
    if (kind === undefined) return { ok: false, help: false, problem: `unknown flag -${name}` };
    if (kind === "boolean") {
      if (inline !== undefined && inline !== "true" && inline !== "false") {
        return { ok: false, help: false, problem: `-${name} takes no value (or =true / =false), got ${JSON.stringify(inline)}` };
      }
      flags[name] = inline !== "false";
    } else {
      const value = inline ?? args.shift();
      if (value === undefined || value === "") return { ok: false, help: false, problem: `-${name} needs a value` };
      flags[name] = value;
    }
  }
  return { ok: true, flags, rest: [] };
}
