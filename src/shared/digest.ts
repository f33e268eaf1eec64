/**
 * Comparing credential digests (runner secret, executor tokens): in constant time, so how long a
 * refusal takes tells nothing about how much of a guessed token's digest matched.
 */
import { timingSafeEqual } from "node:crypto";

const encoder = new TextEncoder();

/** True when two hex SHA-256 digests are equal; compared in constant time. */
export function sameDigest(a: string, b: string): boolean {
  return a.length === b.length && timingSafeEqual(encoder.encode(a), encoder.encode(b));
}
