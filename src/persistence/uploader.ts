/**
 * One upload round of one session: history blocks, then each completed checkpoint's native records
 * and manifest, then the `latest.json` pointer, then the objects a restore (or, once latest.json is
 * this session's own, a load) cut off. Plain module
 * over the object's SQLite and an ObjectStore, so it runs (and is tested) the same with every
 * provider.
 *
 * Storage layout / lifecycle (migrations/session/0005_sync.sql): every put is recorded in SQLite
 * right after it succeeds. Blocks go up PARALLEL_PUTS at a time; a batch is recorded as `inflight`
 * before its puts, so after a crash or an object restart the same bytes go to the same keys again
 * (the puts are create-only, so no duplicate object can appear) before anything new is cut. Checkpoints are published in history order and
 * only once the history they name is uploaded.
 */
import type { SessionState } from "../session/session-state.ts";
import { contentHash, type Layout } from "./layout.ts";
import { MANIFEST_FORMAT, type BlockRef, type CheckpointRef, type Manifest } from "./manifest.ts";
import { encoder, type ObjectStore } from "./store.ts";
import { strays } from "./strays.ts";

/**
 * Transcript blocks of at most 64 KiB; a longer single line gets a block alone
 * (docs/design-notes.md "Persistence").
 */
export const BLOCK_BYTES = 64 * 1024;
/** Blocks per round, so one alarm stays far below the platform's 15 min and others get a turn. */
export const ROUND_BLOCKS = 256;
/** Block puts in flight at once: a Durable Object may hold six outbound connections. */
export const PARALLEL_PUTS = 4;

const NDJSON = "application/x-ndjson";
const JSON_TYPE = "application/json";

export type SyncRow = {
  uploaded_offset: number;
  inflight: string | null;
  dirty_at: number | null;
  failures: number;
  retry_at: number | null;
  error: string | null;
  published: string | null;
  latest_stale: number;
  queued: number;
  /** session-sync.ts `storageIdentity` of the storage this state describes; null until compared. */
  storage: string | null;
};

/** Local state storage does not have yet (history, a checkpoint, or the latest pointer). */
export function behind(s: SessionState): boolean {
  const sql = s.storage.sql;
  const r = sql.exec<SyncRow>("SELECT * FROM sync").toArray()[0];
  if (!r || r.inflight || r.latest_stale || r.uploaded_offset < s.require().log_bytes) return true;
  // A checkpoint to publish, or an object a restore cut off still to delete.
  return sql.exec("SELECT 1 FROM checkpoints WHERE published = 0 UNION ALL SELECT 1 FROM sync_orphans LIMIT 1").toArray().length > 0;
}

export type Published = { checkpoint: string; native: string; offset: number; time: string };

type CheckpointRow = {
  id: string;
  event_offset: number;
  native_seq: number;
  time: string;
  native_key: string | null;
  native_records: number | null;
  native_hash: string | null;
  published: number;
};

export class Uploader {
  readonly #s: SessionState;
  readonly #store: ObjectStore;
  readonly #layout: Layout;

  constructor(state: SessionState, store: ObjectStore, layout: Layout) {
    this.#s = state;
    this.#store = store;
    this.#layout = layout;
  }

  get #sql() {
    return this.#s.storage.sql;
  }

  row(): SyncRow {
    return this.#sql.exec<SyncRow>("SELECT * FROM sync").one();
  }

  /** Uploads up to ROUND_BLOCKS blocks and what they make publishable. True when all is uploaded. */
  async round(): Promise<boolean> {
    let blocks = 0;
    const inflight = this.row().inflight;
    if (inflight) {
      const batch = (JSON.parse(inflight) as BlockRef[]).map((b) => ({ ref: b, text: this.#blockText(b.start, Number.MAX_SAFE_INTEGER, b.end).text }));
      await this.#putBatch(batch);
      blocks += batch.length;
    }
    const end = this.#s.require().log_bytes;
    // A block ends at every checkpoint it reaches, so a restore's cut is a block boundary: the
    // blocks past it hold only the cut-off tail and are deleted whole, and none that a kept
    // checkpoint's manifest names holds any of it.
    const cuts = this.#sql
      .exec<{ o: number }>("SELECT event_offset AS o FROM checkpoints WHERE event_offset > ? AND event_offset < ? ORDER BY event_offset", this.row().uploaded_offset, end)
      .toArray()
      .map((c) => c.o);
    while (this.row().uploaded_offset < end && blocks < ROUND_BLOCKS) {
      const batch: { ref: BlockRef; text: string }[] = [];
      for (let start = this.row().uploaded_offset; start < end && batch.length < PARALLEL_PUTS; ) {
        while (cuts.length > 0 && cuts[0]! <= start) cuts.shift();
        const { text, end: blockEnd } = this.#blockText(start, BLOCK_BYTES, cuts[0] ?? end);
        const key = this.#layout.block(start, blockEnd, contentHash(text));
        batch.push({ ref: { key, start, end: blockEnd }, text });
        start = blockEnd;
      }
      this.#sql.exec("UPDATE sync SET inflight = ?", JSON.stringify(batch.map((b) => b.ref)));
      await this.#putBatch(batch);
      blocks += batch.length;
    }
    await this.#publishCheckpoints();
    const pub = this.row().published;
    // latest.json only ever names a manifest whose history storage already holds.
    const covered = !pub || (JSON.parse(pub) as Published).offset <= this.row().uploaded_offset;
    if (this.row().latest_stale && covered) {
      // Cleared with the manifest it writes, before the put: a change of the session's record
      // during the put (a rebind) marks it stale again, and is not lost by this round.
      const manifest = this.manifest(this.#latestPublished());
      this.#sql.exec("UPDATE sync SET latest_stale = 0");
      try {
        await this.#store.put(this.#layout.latest(), encoder.encode(JSON.stringify(manifest)), JSON_TYPE);
      } catch (e) {
        this.#sql.exec("UPDATE sync SET latest_stale = 1");
        throw e;
      }
      await this.#settleStrays(manifest);
    }
    if (!this.row().latest_stale) await this.#deleteOrphans();
    return this.done();
  }

  /**
   * What a load found past its checkpoint, now that latest.json is this session's own: each one no
   * stored manifest names now (a deployment that still held the session may have published since)
   * becomes an orphan, deleted below; the others stay in storage. Checked once (best effort).
   */
  async #settleStrays(latest: Manifest): Promise<void> {
    const held = this.#sql.exec<{ key: string }>("SELECT key FROM sync_strays").toArray();
    if (held.length === 0) return;
    const still = new Set(await strays(this.#store, this.#layout, latest, this.#s.require().id));
    this.#s.storage.transactionSync(() => {
      for (const { key } of held) if (still.has(key)) this.#sql.exec("INSERT OR IGNORE INTO sync_orphans (key) VALUES (?)", key);
      this.#sql.exec("DELETE FROM sync_strays");
    });
  }

  /** What a restore cut off, now that latest.json names none of it (a failed delete is retried). */
  async #deleteOrphans(): Promise<void> {
    for (const { key } of this.#sql.exec<{ key: string }>("SELECT key FROM sync_orphans").toArray()) {
      await this.#store.delete(key);
      this.#sql.exec("DELETE FROM sync_orphans WHERE key = ?", key);
    }
  }

  /** Nothing local is missing from storage. */
  done(): boolean {
    return !behind(this.#s);
  }

  #blockText(start: number, maxBytes: number, until: number): { text: string; end: number } {
    const lines = this.#s.log.lines(start, maxBytes, until);
    if (lines.length === 0) throw new Error(`no history line starts at byte ${start}`);
    return { text: lines.map((l) => `${l.line}\n`).join(""), end: lines.at(-1)!.end };
  }

  /** Puts a batch of consecutive blocks; only when all succeeded are they recorded. */
  async #putBatch(batch: { ref: BlockRef; text: string }[]): Promise<void> {
    await Promise.all(batch.map((b) => this.#store.create(b.ref.key, encoder.encode(b.text), NDJSON)));
    this.#s.storage.transactionSync(() => {
      for (const { ref } of batch) {
        this.#sql.exec("INSERT OR REPLACE INTO sync_blocks (start, end_offset, key) VALUES (?, ?, ?)", ref.start, ref.end, ref.key);
      }
      this.#sql.exec("UPDATE sync SET inflight = NULL, uploaded_offset = MAX(uploaded_offset, ?)", batch.at(-1)!.ref.end);
    });
  }

  async #publishCheckpoints(): Promise<void> {
    const pending = this.#sql
      .exec<CheckpointRow>("SELECT * FROM checkpoints WHERE published = 0 ORDER BY event_offset")
      .toArray();
    for (const cp of pending) {
      if (cp.event_offset > this.row().uploaded_offset) return;
      if (cp.native_key === null) {
        const before = this.#sql
          .exec<{ s: number }>("SELECT native_seq AS s FROM checkpoints WHERE event_offset < ? ORDER BY event_offset DESC LIMIT 1", cp.event_offset)
          .toArray()[0]?.s ?? 0;
        const records = this.#sql
          .exec<{ record: string }>("SELECT record FROM native WHERE seq > ? AND seq <= ? ORDER BY seq", before, cp.native_seq)
          .toArray();
        const key = this.#layout.native(cp.id);
        const text = records.map((r) => `${r.record}\n`).join("");
        await this.#store.create(key, encoder.encode(text), NDJSON);
        this.#sql.exec("UPDATE checkpoints SET native_key = ?, native_records = ?, native_hash = ? WHERE id = ?", key, records.length, contentHash(text), cp.id);
      }
      await this.#store.create(this.#layout.checkpoint(cp.id), encoder.encode(JSON.stringify(this.manifest(cp.id))), JSON_TYPE);
      const published: Published = { checkpoint: cp.id, native: this.#layout.native(cp.id), offset: cp.event_offset, time: new Date().toISOString() };
      this.#sql.exec("UPDATE checkpoints SET published = 1 WHERE id = ?", cp.id);
      this.#sql.exec("UPDATE sync SET published = ?, latest_stale = 1", JSON.stringify(published));
    }
  }

  #latestPublished(): string | undefined {
    const p = this.row().published;
    return p ? (JSON.parse(p) as Published).checkpoint : undefined;
  }

  /** The manifest of checkpoint `id` (undefined: the session before its first completed turn). */
  manifest(id: string | undefined): Manifest {
    const r = this.#s.require();
    const all = this.#sql.exec<CheckpointRow>("SELECT * FROM checkpoints ORDER BY event_offset").toArray();
    const upTo = id === undefined ? -1 : all.findIndex((c) => c.id === id);
    const cp = upTo >= 0 ? all[upTo]! : undefined;
    const offset = cp?.event_offset ?? 0;
    const checkpoints: CheckpointRef[] = all.slice(0, upTo + 1).map((c) => ({
      id: c.id,
      offset: c.event_offset,
      time: c.time,
      native: c.native_key!,
      records: c.native_records!,
      ...(c.native_hash ? { sha256: c.native_hash } : {}),
    }));
    const history = this.#sql
      .exec<{ key: string; start: number; end_offset: number }>("SELECT * FROM sync_blocks WHERE start < ? ORDER BY start", offset)
      .toArray()
      .map((b) => ({ key: b.key, start: b.start, end: b.end_offset }));
    const session: Manifest["session"] = {
      id: r.id,
      tenant: r.tenant,
      harness: r.harness,
      config: JSON.parse(r.config),
      created_at: r.created_at,
      updated_at: r.updated_at,
      status: r.status,
      descriptors: JSON.parse(r.descriptors),
    };
    if (r.credential_bindings) session.credential_bindings = JSON.parse(r.credential_bindings);
    const bindings = JSON.parse(r.bindings) as NonNullable<Manifest["session"]["bindings"]>;
    if (bindings.length > 0) session.bindings = bindings;
    return {
      format: MANIFEST_FORMAT,
      session,
      cursor_key: r.cursor_key,
      epoch: r.epoch,
      epoch_cuts: this.#sql.exec<{ epoch: number; last_seq: number }>("SELECT epoch, last_seq FROM epoch_cuts ORDER BY epoch").toArray(),
      credentials: this.#sql.exec<Manifest["credentials"][number]>("SELECT alias, key_id, iv, ciphertext FROM credentials").toArray(),
      checkpoint: cp ? { id: cp.id, offset: cp.event_offset, time: cp.time } : null,
      history,
      checkpoints,
    };
  }
}
