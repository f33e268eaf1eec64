/**
 * Object keys in external storage (docs/design-notes.md "Persistence layout"):
 *
 *   <prefix>/<tenant-hash>/<session>/blocks/<start>-<end>-<hash>.ndjson   immutable history block
 *   <prefix>/<tenant-hash>/<session>/native/<checkpoint>.ndjson           native records of one turn
 *   <prefix>/<tenant-hash>/<session>/checkpoints/<checkpoint>.json        immutable manifest
 *   <prefix>/<tenant-hash>/<session>/latest.json                          the latest manifest (overwritten)
 *
 * The tenant is hashed (SHA-256, 32 hex) because a tenant name may hold any character; `start`
 * and `end` are zero-padded byte offsets into the NDJSON history so keys sort in history order,
 * and `hash` (the first 16 hex of the block's SHA-256) keeps a block written after a restore apart
 * from an older block that covered the same offsets with other content.
 */
import { createHash } from "node:crypto";
import { sha256Hex } from "../shared/ids.ts";

/**
 * SHA-256 (64 hex) of an object's text: a block's key carries its first 16 hex, a manifest records
 * a native object's whole, and restore and load check both against what they read.
 */
export function contentHash(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** Digits of a zero-padded offset: 2^53 fits in 16 decimal digits. */
const OFFSET_DIGITS = 16;

export class Layout {
  readonly #root: string;

  private constructor(root: string) {
    this.#root = root;
  }

  static async of(prefix: string, tenant: string, session: string): Promise<Layout> {
    const p = prefix === "" || prefix.endsWith("/") ? prefix : `${prefix}/`;
    return new Layout(`${p}${(await sha256Hex(tenant)).slice(0, 32)}/${session}/`);
  }

  block(start: number, end: number, hash: string): string {
    const pad = (n: number) => String(n).padStart(OFFSET_DIGITS, "0");
    return `${this.#root}blocks/${pad(start)}-${pad(end)}-${hash.slice(0, 16)}.ndjson`;
  }

  /** Whether `key` is this session's block key for `start`..`end` (any content hash): checked before it is read. */
  isBlock(key: string, start: number, end: number): boolean {
    const hash = key.slice(-"0123456789abcdef.ndjson".length, -".ndjson".length);
    return /^[0-9a-f]{16}$/.test(hash) && key === this.block(start, end, hash);
  }

  native(checkpoint: string): string {
    return `${this.#root}native/${checkpoint}.ndjson`;
  }

  checkpoint(checkpoint: string): string {
    return `${this.#root}checkpoints/${checkpoint}.json`;
  }

  latest(): string {
    return `${this.#root}latest.json`;
  }

  /** The session's folder: every key above starts with it. */
  folder(): string {
    return this.#root;
  }

  /** What a block, native or checkpoint key of the session's folder is; undefined for any other key (latest.json among them). */
  kindOf(key: string): StoredObject | undefined {
    if (!key.startsWith(this.#root)) return undefined;
    const rest = key.slice(this.#root.length);
    const block = /^blocks\/(\d{16})-\d{16}-[0-9a-f]{16}\.ndjson$/.exec(rest);
    if (block) return { kind: "block", start: Number(block[1]) };
    if (/^native\/[0-9a-f]{32}\.ndjson$/.test(rest)) return { kind: "native" };
    const checkpoint = /^checkpoints\/([0-9a-f]{32})\.json$/.exec(rest);
    return checkpoint ? { kind: "checkpoint", checkpoint: checkpoint[1]! } : undefined;
  }
}

export type StoredObject =
  | { kind: "block"; start: number }
  | { kind: "native" }
  | { kind: "checkpoint"; checkpoint: string };
