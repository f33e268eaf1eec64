/**
 * How a zod failure reads, everywhere: one line per problem, each starting with the field path
 * (`tokens[2].tenant: must be 1 to 128 bytes`, `config.temperature: unknown field`). Used for
 * request bodies, the host configuration, the harness protocol and tool results, so an operator
 * and a client read the same wording. Pure: imported by the Worker and by Node.
 */
import type * as z from "zod";

/** `tokens[2].tenant`, `harnesses.pi.command[0]`, `providers["my.llm"]`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else if (typeof seg === "string" && /^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(seg)) out += out ? `.${seg}` : seg;
    else out += `[${JSON.stringify(String(seg))}]`;
  }
  return out;
}

/** One line per problem, each naming its field; an unknown field is named itself. No repeats. */
export function issueLines(issues: readonly z.core.$ZodIssue[]): string[] {
  const out: string[] = [];
  for (const iss of issues) {
    if (iss.code === "unrecognized_keys") {
      for (const key of iss.keys) out.push(`${formatPath([...iss.path, key])}: unknown field`);
    } else {
      const where = formatPath(iss.path);
      // zod's words for an absent member ("Invalid input: expected string, received undefined")
      // name a JavaScript value, not anything a JSON sender wrote.
      const message = iss.code === "invalid_type" && / received undefined$/.test(iss.message) ? "required" : iss.message;
      out.push(where ? `${where}: ${message}` : message);
    }
  }
  return [...new Set(out)];
}

/** The first `max` problems on one line, for an error message. */
export function issueSummary(issues: readonly z.core.$ZodIssue[], max = 5): string {
  return issueLines(issues).slice(0, max).join("; ");
}
