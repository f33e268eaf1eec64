/**
 * Checks on a JSON text (a request body, a host tool's answer) that JSON.parse cannot make: how
 * deep it nests (before the parse, so nothing recursive meets a value nested thousands deep) and
 * whether an object repeats a member name (after it: JSON.parse keeps the last and drops the others
 * silently, so `{"type":"user.interrupt","type":"user.message",...}` would be a message). One
 * linear pass each, over at most the body cap.
 */
import { unkeptValues } from "./json-values.ts";
import { formatPath } from "./zod-issues.ts";

/**
 * Deepest nesting of arrays and objects a request body or a host tool's answer may have, levels.
 * Schema checks, JSON Schema validation, serialisation and structured clone all recurse; a value
 * nested thousands deep would overflow the stack in one of them. 64 is far beyond any real session
 * config, tool schema or result.
 */
export const MAX_JSON_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether the JSON text opens more than `limit` arrays or objects inside each other. Brackets inside
 * strings do not count; the text need not be valid JSON (the parser judges that afterwards).
 */
export function nestingExceeds(text: string, limit: number): boolean {
  // Each level opens with a bracket: a text no longer than the bound cannot pass it.
  if (text.length <= limit) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === BACKSLASH) i++; // skip the escaped character
      else if (ch === QUOTE) inString = false;
    } else if (ch === QUOTE) inString = true;
    else if (ch === 0x7b || ch === 0x5b) {
      if (++depth > limit) return true;
    } else if (ch === 0x7d || ch === 0x5d) depth--;
  }
  return false;
}

type Frame = { names: Set<string> | null; index: number; key: string | null; expectKey: boolean };

/**
 * The path of the first member whose name its object already has (`config.tools[0].name`), or
 * null. `text` must be valid JSON (call it after JSON.parse succeeded): names are decoded by
 * JSON.parse, so `"a"` and `"\u0061"` are the same name.
 */
export function duplicateMember(text: string): string | null {
  const stack: Frame[] = [];
  // Where the top frame sits: each enclosing container's current member name or index.
  const path = (): PropertyKey[] => stack.slice(0, -1).map((f) => (f.names ? f.key! : f.index));
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (ch === QUOTE) {
      const start = i;
      for (i++; text.charCodeAt(i) !== QUOTE; i++) if (text.charCodeAt(i) === BACKSLASH) i++;
      const top = stack.at(-1);
      if (top?.names && top.expectKey) {
        const name = JSON.parse(text.slice(start, i + 1)) as string;
        if (top.names.has(name)) return formatPath([...path(), name]);
        top.names.add(name);
        top.key = name;
        top.expectKey = false;
      }
    } else if (ch === 0x7b || ch === 0x5b) {
      stack.push({ names: ch === 0x7b ? new Set() : null, index: 0, key: null, expectKey: ch === 0x7b });
    } else if (ch === 0x7d || ch === 0x5d) {
      stack.pop();
    } else if (ch === 0x2c) {
      const top = stack.at(-1)!;
      if (top.names) top.expectKey = true;
      else top.index++;
    }
  }
  return null;
}

/**
 * JSON.parse behind the nesting bound (checked first: JSON.parse copes with any depth, what
 * recurses over the value after it may not). The caller words the refusal.
 */
export function parseWithinDepth(text: string): { value: unknown } | { deep: true } | { syntax: string } {
  if (nestingExceeds(text, MAX_JSON_DEPTH)) return { deep: true };
  try {
    return { value: JSON.parse(text) };
  } catch (e) {
    return { syntax: e instanceof Error ? e.message : "parse error" };
  }
}

/**
 * What JSON.parse made of `text` that is not what was sent: a value it could not keep
 * (json-values.ts `unkeptValues`, its line) or a member name given twice (its path). Null when
 * the value is the text's. A blank text (a default stood in for it) repeats nothing.
 */
export function notAsSent(text: string, value: unknown): { unkept: string } | { repeated: string } | null {
  const [unkept] = unkeptValues(value);
  if (unkept) return { unkept };
  const repeated = text.trim() === "" ? null : duplicateMember(text);
  return repeated ? { repeated } : null;
}
