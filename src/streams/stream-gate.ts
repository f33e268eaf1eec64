/**
 * StreamGate: the one object that counts SSE streams across the deployment (`limits.subscribers`).
 * It is not called on every stream open: Worker isolates hold slots in blocks and sync here only
 * when their block runs out, when they give slots back, or to renew (see stream-slots.ts).
 *
 * Storage layout / lifecycle: `holdings(holder, tenant, slots, expires_at)`, one row per isolate
 * and tenant. Each sync states everything the isolate wants to hold; its rows are rewritten and
 * their expiry pushed `LEASE_TTL_MS` ahead. Rows past their expiry belong to an isolate that died
 * (or lost contact) and are deleted on the next sync of anyone, so a crash frees its slots within
 * a minute without any alarm. Rows last synced before this instance started are deleted too: a
 * restart of the runtime (the local stack's restart or SIGHUP reload, a deploy) ends every isolate
 * with it, and their streams with them. Should only this object have restarted, live isolates
 * state their holdings again at their next renewal (within 20 s).
 */
import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env.ts";
import { getRuntime } from "../runtime.ts";
import { migrate } from "../storage/migrate.ts";
import { grant, keepHint } from "./shares.ts";
import { configuredTenants, tenantShare } from "../tenant/share.ts";
import m0001 from "../../migrations/stream_gate/0001_init.sql";

const MIGRATIONS = [m0001];

/** How long a holding counts without a sync from its isolate, ms (isolates renew every 20 s). */
export const LEASE_TTL_MS = 60_000;

export const GATE_NAME = "default";

/**
 * Per tenant: streams open now (`need`) and slots wanted in all (`want`). Maps, as the grant's
 * slots: a tenant may be named anything, `__proto__` included, which a plain object's key would
 * turn into its prototype (and such an object cannot cross RPC).
 */
export type Wants = Map<string, { need: number; want: number }>;
/** `stale`: a later sync of this holder was applied first; nothing changed. */
export type Granted = { seq: number; slots: Map<string, number>; keep: number; stale: boolean };

export class StreamGate extends DurableObject<Env> {
  /** When this instance started, ms: a holding synced before it belongs to an earlier runtime. */
  readonly #startedAt = Date.now();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    migrate(ctx.storage, MIGRATIONS);
  }

  /** Sets `holder`'s holding to what `wants` asks, within the cap and the tenants' shares. */
  async sync(holder: string, seq: number, asked: Wants | Record<string, { need: number; want: number }>): Promise<Granted> {
    // An isolate of the previous release (while a deploy replaces them) sends a plain object.
    const wants: Wants = asked instanceof Map ? asked : new Map(Object.entries(asked));
    const { config } = await getRuntime(this.env);
    const cap = config.limits.subscribers;
    const share = tenantShare(cap, configuredTenants(config));
    const sql = this.ctx.storage.sql;
    const now = Date.now();
    return this.ctx.storage.transactionSync(() => {
      // Expired, or last synced (expiry − LEASE_TTL_MS) before this instance started.
      const before = Math.max(now, this.#startedAt + LEASE_TTL_MS);
      sql.exec("DELETE FROM holdings WHERE expires_at < ?", before);
      sql.exec("DELETE FROM holders WHERE expires_at < ?", before);
      const last = sql.exec<{ seq: number }>("SELECT seq FROM holders WHERE holder = ?", holder).toArray()[0]?.seq ?? 0;
      const total = () => sql.exec<{ n: number }>("SELECT COALESCE(SUM(slots), 0) AS n FROM holdings").one().n;
      if (seq <= last) return { seq, slots: new Map(), keep: keepHint(cap, total()), stale: true };
      sql.exec("DELETE FROM holdings WHERE holder = ?", holder);
      sql.exec(
        "INSERT INTO holders (holder, seq, expires_at) VALUES (?, ?, ?) ON CONFLICT (holder) DO UPDATE SET seq = excluded.seq, expires_at = excluded.expires_at",
        holder,
        seq,
        now + LEASE_TTL_MS,
      );
      // Open streams first, for every tenant: what is granted beyond them must fit around all of them.
      const put = (tenant: string, n: number) =>
        sql.exec(
          "INSERT INTO holdings (holder, tenant, slots, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (holder, tenant) DO UPDATE SET slots = excluded.slots",
          holder,
          tenant,
          n,
          now + LEASE_TTL_MS,
        );
      for (const [tenant, w] of wants) if (w.need > 0) put(tenant, w.need);
      const slots = new Map<string, number>();
      for (const [tenant, w] of wants) {
        const ofTenant = sql.exec<{ n: number }>("SELECT COALESCE(SUM(slots), 0) AS n FROM holdings WHERE tenant = ?", tenant).one().n;
        const n = grant({ cap, share, need: w.need, want: w.want, total: total(), ofTenant });
        slots.set(tenant, n);
        if (n > w.need) put(tenant, n);
      }
      return { seq, slots, keep: keepHint(cap, total()), stale: false };
    });
  }
}
