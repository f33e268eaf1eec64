/**
 * Splits an `open` whose native state would not fit in one `svc-harness/1` line into `state_part`
 * commands followed by an `open` with an empty record list (docs/harness-protocol.md "Native state
 * in pieces"). Every line stays within the harness's `max_line_bytes`; a state that fits is sent
 * in the `open` itself, as before, so harnesses without `state_part` keep working for it.
 */
import type { CommandInput, NativeRecord } from "./protocol.ts";

type Open = CommandInput<"open">;
type Part = CommandInput<"state_part">;

/** Bytes kept for the correlation id the client adds (`"id":"c<counter>",`), far above any real one. */
const ID_ALLOWANCE = 48;

export type OpenPlan = { parts: Part[]; open: Open } | { error: string };

export function planOpen(open: Open, maxLineBytes: number): OpenPlan {
  const whole = bytes(open) + ID_ALLOWANCE;
  if (whole <= maxLineBytes) return { parts: [], open };
  const records = open.state?.records ?? [];
  const bare: Open = { ...open, ...(open.state ? { state: { ...open.state, records: [] } } : {}) };
  if (records.length === 0 || bytes(bare) + ID_ALLOWANCE > maxLineBytes) {
    return { error: `the open command (${whole} bytes) exceeds the harness's line limit (${maxLineBytes} bytes)` };
  }
  const envelope = partEnvelope(open.session);
  const parts: Part[] = [];
  let current: NativeRecord[] = [];
  let size = envelope;
  for (const [i, r] of records.entries()) {
    const n = bytes(r);
    if (envelope + n > maxLineBytes) {
      return { error: `native state record ${i} (${n} bytes) needs a ${envelope + n}-byte state_part line, over the harness's line limit (${maxLineBytes} bytes)` };
    }
    const add = n + (current.length > 0 ? 1 : 0); // the comma between records
    if (size + add > maxLineBytes) {
      parts.push({ op: "state_part", session: open.session, records: current });
      current = [];
      size = envelope;
    }
    size += n + (current.length > 0 ? 1 : 0);
    current.push(r);
  }
  if (current.length > 0) parts.push({ op: "state_part", session: open.session, records: current });
  return { parts, open: bare };
}

/**
 * The line a record of `recordBytes` (its JSON, UTF-8) needs to be sent back to the harness on its
 * own (a `state_part` of one record), in bytes; a record past the harness's `max_line_bytes` by
 * this measure can never be re-opened, so the runner-host refuses it when the harness writes it.
 */
export function recordLineBytes(session: string, recordBytes: number): number {
  return partEnvelope(session) + recordBytes;
}

function partEnvelope(session: string): number {
  return bytes({ op: "state_part", session, records: [] }) + ID_ALLOWANCE;
}

function bytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), "utf8");
}
