/**
 * One Worker isolate's share of `limits.subscribers`: slots for SSE streams, held per tenant in
 * blocks granted by the StreamGate. A stream open takes a held slot without any call when one is
 * free; only when none is does the isolate sync with the gate (asking for the streams waiting plus
 * the headroom the gate allows). A stream end gives its slot back locally; surplus beyond the
 * headroom, and everything of a tenant with no stream left, goes back to the gate in the next sync.
 *
 * Lifecycle: state lives in isolate memory only. Every sync states the whole holding (the newest
 * wins); while any slot is held the isolate renews every `RENEW_MS` (driven by its streams'
 * timers), and if the isolate dies its holdings expire at the gate.
 */
import { newId } from "../shared/ids.ts";
import type { Env } from "../env.ts";
import { GATE_NAME, type Granted, type Wants } from "./stream-gate.ts";

/** Renewal interval of a holding at the gate, ms: a third of its lifetime, so one lost sync is harmless. */
export const RENEW_MS = 20_000;

export type SyncFn = (holder: string, seq: number, wants: Wants) => Promise<Granted>;

type Tenant = { inUse: number; held: number; waiting: number };

export class StreamSlots {
  readonly #holder = newId();
  readonly #sync: SyncFn;
  readonly #tenants = new Map<string, Tenant>();
  #keep = 0;
  #lastSync = 0;
  /** Sequence of the last sync sent, and of the last answer applied. */
  #sent = 0;
  #applied = 0;

  constructor(sync: SyncFn) {
    this.#sync = sync;
  }

  /** Takes a slot for a new stream of `tenant`; false when the deployment (or the tenant's share) is full. */
  async acquire(tenant: string): Promise<boolean> {
    const t = this.#tenant(tenant);
    if (this.#take(t)) return true;
    t.waiting += 1;
    try {
      await this.#syncNow();
    } finally {
      t.waiting -= 1;
    }
    return this.#take(t);
  }

  /** A stream of `tenant` ended. Resolves once any slots given back have reached the gate. */
  release(tenant: string): Promise<void> {
    const t = this.#tenant(tenant);
    t.inUse = Math.max(0, t.inUse - 1);
    return t.held > this.#target(t) ? this.#syncNow() : Promise.resolve();
  }

  /** Called often by open streams: renews the holding when it is due. */
  tick(): Promise<void> | undefined {
    if (Date.now() - this.#lastSync < RENEW_MS || ![...this.#tenants.values()].some((t) => t.held > 0)) return undefined;
    return this.#syncNow();
  }

  /** Open streams and held slots per tenant (for logs and tests). */
  snapshot(): Record<string, { inUse: number; held: number }> {
    const busy = [...this.#tenants].filter(([, t]) => t.inUse > 0 || t.held > 0);
    return Object.fromEntries(busy.map(([k, t]) => [k, { inUse: t.inUse, held: t.held }]));
  }

  #tenant(name: string): Tenant {
    let t = this.#tenants.get(name);
    if (!t) this.#tenants.set(name, (t = { inUse: 0, held: 0, waiting: 0 }));
    return t;
  }

  #take(t: Tenant): boolean {
    if (t.held - t.inUse <= 0) return false;
    t.inUse += 1;
    return true;
  }

  /** What a tenant should hold: its streams, those waiting, and headroom while it has any. */
  #target(t: Tenant): number {
    const busy = t.inUse + t.waiting;
    return busy === 0 ? 0 : busy + this.#keep;
  }

  /**
   * States the whole holding to the gate. Each caller sends its own sync from its own request
   * (workerd lets no request wait on another's I/O); they may overlap, so each carries a rising
   * sequence number and only the newest answer is applied, here and at the gate.
   */
  async #syncNow(): Promise<void> {
    const wants: Wants = new Map();
    for (const [name, t] of this.#tenants) {
      const want = this.#target(t);
      wants.set(name, { need: t.inUse, want });
      // Giving back takes effect at once, so no new stream uses a slot on its way back.
      t.held = Math.min(t.held, Math.max(want, t.inUse));
    }
    const seq = ++this.#sent;
    this.#lastSync = Date.now();
    const granted = await this.#sync(this.#holder, seq, wants);
    if (granted.stale || seq <= this.#applied) return;
    this.#applied = seq;
    this.#keep = granted.keep;
    for (const [name, t] of this.#tenants) {
      // Streams taken from held slots while the sync ran are open: they stay counted.
      t.held = Math.max(slotsOf(granted, name), t.inUse);
      if (t.held === 0 && t.inUse === 0 && t.waiting === 0) this.#tenants.delete(name);
    }
  }
}

let slots: StreamSlots | undefined;

/** This isolate's slots, syncing with the deployment's StreamGate. */
export function isolateSlots(env: Env): StreamSlots {
  slots ??= new StreamSlots((holder, seq, wants) => env.STREAMS.getByName(GATE_NAME).sync(holder, seq, wants));
  return slots;
}

/** A tenant's grant; a gate of the previous release (while a deploy replaces it) answers a plain object. */
function slotsOf(granted: Granted, tenant: string): number {
  const slots = granted.slots as Granted["slots"] | Record<string, number>;
  return (slots instanceof Map ? slots.get(tenant) : Object.hasOwn(slots, tenant) ? slots[tenant] : undefined) ?? 0;
}
