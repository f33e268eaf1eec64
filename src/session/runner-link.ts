/**
 * The object end of a session's runner link (protocol: src/shared/runner-protocol.ts).
 *
 * Object → runner messages are numbered and kept in `link_out` until the runner-host acknowledges
 * them, so a reconnect after a dropped socket resends exactly what it missed. Provider keys are
 * never stored: `open` and `run` are kept without `provider.key`, and the key is attached from the
 * Worker's variables each time the message is sent (a resend carries the key as of the resend).
 * `native` parts are kept as the range of native records they carry and read when sent, so an open
 * copies none of the session's native state, and no part meets the platform's row cap. The runner socket is
 * a hibernatable WebSocket tagged `runner` carrying its lease in the attachment; only the current
 * lease's socket is used.
 */
import { LEASE_GONE_CLOSE_CODE, type LinkDown, type ProviderGrant } from "../shared/runner-protocol.ts";
import { log } from "../log.ts";
import type { Runtime } from "../runtime.ts";
import type { NativeRange } from "./open-message.ts";
import type { SessionState } from "./session-state.ts";

const TAG = "runner";

type Unnumbered = LinkDown extends infer T ? (T extends { seq: number } ? Omit<T, "seq"> : never) : never;
/** A provider grant as stored: everything but the key. */
type StoredGrant = Omit<ProviderGrant, "key">;

export class RunnerLink {
  readonly #ctx: DurableObjectState;
  readonly #s: SessionState;
  /** Runner sockets' leases as read from their attachments (per instance; saves a deserialise per message). */
  readonly #leases = new WeakMap<WebSocket, number>();

  constructor(ctx: DurableObjectState, state: SessionState) {
    this.#ctx = ctx;
    this.#s = state;
  }

  isRunnerSocket(ws: WebSocket): boolean {
    if (this.#leases.has(ws)) return true;
    try {
      return this.#ctx.getTags(ws).includes(TAG);
    } catch {
      // A socket this object already closed has no tags any more (its close echo arrives later).
      return false;
    }
  }

  /** From the attachment (the truth, kept across hibernation), read once per socket and instance. */
  leaseOf(ws: WebSocket): number {
    let lease = this.#leases.get(ws);
    if (lease === undefined) this.#leases.set(ws, (lease = (ws.deserializeAttachment() as { lease: number }).lease));
    return lease;
  }

  socket(): WebSocket | undefined {
    const lease = this.#s.row()?.lease;
    return this.#ctx
      .getWebSockets(TAG)
      .find((ws) => ws.readyState === WebSocket.OPEN && this.leaseOf(ws) === lease);
  }

  /**
   * Accepts a runner socket. One with a stale lease is refused before any socket (`409`, which the
   * runner-host takes as the lease gone, at once): a socket accepted and closed with a code reached
   * it at once, but its close event only when the runtime ended the connection ~10 s later, and the
   * session held its runner-host's `limits.loaded` slot until then (a session closed as it was
   * placed, say).
   */
  accept(lease: number): Response {
    const row = this.#s.row();
    if (!row || row.lease !== lease || row.link_state === "none") return new Response("lease is not current", { status: 409 });
    const pair = new WebSocketPair();
    const server = pair[1];
    this.#ctx.acceptWebSocket(server, [TAG]);
    server.serializeAttachment({ lease });
    for (const old of this.#ctx.getWebSockets(TAG)) if (old !== server) old.close(1000, "replaced");
    server.send(JSON.stringify({ t: "ack", up: row.up_seq } satisfies LinkDown));
    return new Response(null, { status: 101, webSocket: pair[0] });
  }

  /**
   * Numbers and stores a message (without its provider key), and sends it (with the key from
   * `rt`) if the runner is connected. In a transaction. `rt` is needed for `open` and `run`.
   */
  push(m: Unnumbered | NativeRange, rt?: Runtime): void {
    const sql = this.#s.storage.sql;
    const seq = this.#s.require().down_seq + 1;
    this.#s.set({ down_seq: seq });
    const stored = "provider" in m ? { ...m, provider: withoutKey(m.provider), seq } : { ...m, seq };
    sql.exec("INSERT INTO link_out (seq, body) VALUES (?, ?)", seq, JSON.stringify(stored));
    const ws = this.socket();
    if (ws) ws.send(this.#wire(stored, rt));
  }

  /** The runner applied everything up to `down`: drop it; after a hello, resend the rest (keys from `rt`). */
  acked(down: number, resend: boolean, rt?: Runtime): void {
    const sql = this.#s.storage.sql;
    sql.exec("DELETE FROM link_out WHERE seq <= ?", down);
    if (!resend) return;
    const ws = this.socket();
    if (!ws) return;
    for (const r of sql.exec<{ body: string }>("SELECT body FROM link_out ORDER BY seq").toArray()) {
      ws.send(this.#wire(JSON.parse(r.body) as StoredDown, rt));
    }
  }

  ackUp(ws: WebSocket, up: number): void {
    ws.send(JSON.stringify({ t: "ack", up } satisfies LinkDown));
  }

  /** Starts a new lease: numbering restarts, the old lease's socket is closed. In a transaction. */
  newLease(): number {
    this.#s.storage.sql.exec("DELETE FROM link_out");
    const lease = this.#s.require().lease + 1;
    this.#s.set({ lease, up_seq: 0, down_seq: 0, link_state: "requested", link_lost_at: null });
    for (const ws of this.#ctx.getWebSockets(TAG)) ws.close(LEASE_GONE_CLOSE_CODE, "lease replaced");
    return lease;
  }

  /** Gives up the current lease (detach): its socket is told and closed. In a transaction. */
  release(reason: string): void {
    const ws = this.socket();
    if (ws) {
      this.push({ t: "detach", reason });
      ws.close(LEASE_GONE_CLOSE_CODE, "detached");
    }
    this.#s.set({ link_state: "none", link_lost_at: null });
    this.#s.storage.sql.exec("DELETE FROM link_out");
  }

  /** The message as sent: a stored provider grant gets the key the Worker holds now, a native range its records. */
  #wire(m: StoredDown, rt: Runtime | undefined): string {
    return m.range ? this.#nativeWire(m.seq, m.range) : wire(m, rt);
  }

  /**
   * A `native` message from the records its range names, their stored JSON text joined as it is
   * (nothing parsed). The range is of the native state this lease opened with: a resume, which cuts
   * native records, and a restore or load, which replace them, end the lease first.
   */
  #nativeWire(seq: number, range: NativeRange["range"]): string {
    const rows = this.#s.storage.sql.exec<{ record: string }>("SELECT record FROM native WHERE seq > ? AND seq <= ? ORDER BY seq", range.after, range.last).toArray();
    if (rows.length !== range.count) {
      log("error", "a native part's records changed before it was sent", { session_id: this.#s.row()?.id, expected: range.count, found: rows.length });
    }
    return `{"t":"native","seq":${seq},"records":[${rows.map((r) => r.record).join(",")}]}`;
  }
}

type StoredDown = { t: string; seq: number; provider?: StoredGrant; range?: NativeRange["range"] };

function withoutKey(g: ProviderGrant | StoredGrant): StoredGrant {
  const { prefix, base_url, api } = g;
  return { prefix, ...(base_url !== undefined ? { base_url } : {}), ...(api !== undefined ? { api } : {}) };
}

/** A stored message as sent, with the provider key the Worker holds now. */
function wire(m: StoredDown, rt: Runtime | undefined): string {
  if (!m.provider) return JSON.stringify(m);
  if (!rt) throw new Error(`a ${m.t} message needs the runtime to attach its provider key`);
  const p = Object.hasOwn(rt.config.providers, m.provider.prefix) ? rt.config.providers[m.provider.prefix] : undefined;
  // A key gone from the environment since the message was stored: the harness's call fails with
  // the provider's own refusal, which is what the tenant should see.
  const key = (p && rt.vars[p.api_key_env]) || "";
  return JSON.stringify({ ...m, provider: { ...m.provider, key } });
}

