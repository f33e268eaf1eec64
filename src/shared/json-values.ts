/**
 * What JSON.parse hands back that could not be kept as it was sent, anywhere in a decoded value:
 * - a `__proto__` key: JSON.parse keeps it as data, but copying it into a new object (as schema
 *   parsing does) sets the prototype instead, so the member silently vanishes (a harness named
 *   `__proto__`, a tool parameter);
 * - a number beyond the double range (`1e400`): it parses as `Infinity` and is stored as `null`;
 * - a string (or name) with a lone surrogate (`"\ud800"`): no UTF-8 text holds it, so it would
 *   reach a model, a tool or a file as U+FFFD, not as it was recorded.
 * Used by request bodies and by both configuration files, with one wording. Iterative: deep
 * nesting must not overflow. Pure: imported by the Worker and by Node.
 */
import { formatPath } from "./zod-issues.ts";

/** `a.b[2]: `, or nothing for the value itself (a bare string, say a tool's progress frame). */
function where(path: PropertyKey[]): string {
  const at = formatPath(path);
  return at ? `${at}: ` : "";
}

/** One line per problem, each naming where (`harnesses.__proto__: the name __proto__ is not allowed`), in document order. */
export function unkeptValues(value: unknown): string[] {
  const found: string[] = [];
  const stack: { v: unknown; path: PropertyKey[] }[] = [{ v: value, path: [] }];
  while (stack.length > 0) {
    const { v, path } = stack.pop()!;
    if (typeof v === "number" && !Number.isFinite(v)) found.push(`${where(path)}number is out of range`);
    if (typeof v === "string" && !v.isWellFormed()) found.push(`${where(path)}text is not valid Unicode (a lone surrogate)`);
    if (typeof v !== "object" || v === null) continue;
    const array = Array.isArray(v);
    const children = Object.entries(v);
    // Pushed last first, so the stack hands them back in document order.
    for (let i = children.length - 1; i >= 0; i--) {
      const [k, child] = children[i]!;
      const at = [...path, array ? Number(k) : k];
      if (k === "__proto__") found.push(`${formatPath(at)}: the name __proto__ is not allowed`);
      if (!k.isWellFormed()) found.push(`${formatPath(at)}: the name is not valid Unicode (a lone surrogate)`);
      if (typeof child === "object" || typeof child === "number" || typeof child === "string") stack.push({ v: child, path: at });
    }
  }
  return found;
}

/**
 * The value with every lone surrogate, in strings and member names, replaced by U+FFFD, in place
 * (a value fresh from JSON.parse). For text nobody can be asked to fix (a model's output, relayed
 * by a harness): it is recorded as every reader and tool will get it. Iterative, like the above.
 */
export function wellFormed<T>(value: T): T {
  if (typeof value === "string") return (value.isWellFormed() ? value : value.toWellFormed()) as T;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v !== "object" || v === null) continue;
    const o = v as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      const child = o[k];
      if (typeof child === "string" && !child.isWellFormed()) o[k] = child.toWellFormed();
      else if (typeof child === "object" && child !== null) stack.push(child);
      if (!k.isWellFormed() && !Array.isArray(o)) {
        const fixed = k.toWellFormed();
        if (!(fixed in o)) o[fixed] = o[k];
        delete o[k];
      }
    }
  }
  return value;
}

/**
 * Whether a value nests arrays and objects more than `limit` levels deep (the value itself, if an
 * object or array, is level 1), for values that did not come through a text check (a harness's
 * tool arguments, its native records). Iterative, like the above.
 */
export function nestsDeeper(value: unknown, limit: number): boolean {
  const stack: { v: unknown; depth: number }[] = [{ v: value, depth: 1 }];
  while (stack.length > 0) {
    const { v, depth } = stack.pop()!;
    if (typeof v !== "object" || v === null) continue;
    if (depth > limit) return true;
    for (const child of Object.values(v)) if (typeof child === "object" && child !== null) stack.push({ v: child, depth: depth + 1 });
  }
  return false;
}
