/**
 * The arithmetic of `limits.subscribers` (concurrent SSE streams across the deployment): how many
 * slots a holder may get, and how much idle headroom an isolate may keep (a tenant's share of the
 * cap: ../tenant/share.ts). Pure, so it is tested in Node.
 */

/** Idle headroom an isolate may keep, at most this many slots per tenant: bounds a block. */
export const MAX_KEEP = 16;
/** Headroom is this fraction (1/n) of what is still free, so it shrinks to 0 near the cap. */
const KEEP_DIVISOR = 8;

/**
 * Slots an isolate may keep unused for a tenant, given how many are free deployment-wide. Far from
 * the cap this saves a gate call on most stream opens and ends; near it the headroom is 0, so the
 * cap is exact: every open asks the gate and every end gives its slot back.
 */
export function keepHint(cap: number, held: number): number {
  return Math.max(0, Math.min(MAX_KEEP, Math.floor((cap - held) / KEEP_DIVISOR)));
}

export type GrantInput = {
  cap: number;
  share: number;
  /** Streams this holder has open for the tenant: always recorded (they are open), cap or not. */
  need: number;
  /** What the holder would like to hold: `need`, plus new streams waiting, plus headroom. */
  want: number;
  /** Slots recorded now, all tenants / this tenant, this holder's open streams included. */
  total: number;
  ofTenant: number;
};

/** Slots recorded for the holder: its open streams, plus what it wants beyond them while the cap and the tenant's share leave room. */
export function grant(g: GrantInput): number {
  const room = Math.min(g.want - g.need, g.cap - g.total, g.share - g.ofTenant);
  return g.need + Math.max(0, room);
}
