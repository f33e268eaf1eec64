/**
 * Brings a published checkpoint back into a session's SQLite: `load` (the session is not on this
 * deployment) and `restore` (the session's settled state is replaced). The download happens first,
 * outside any transaction; the replacement is one `transactionSync`, so a failed download or a
 * crash leaves the local state as it was.
 */
import type { SessionState } from "../session/session-state.ts";
import { contentHash, type Layout } from "./layout.ts";
import type { BlockRef, Manifest } from "./manifest.ts";
import type { Published } from "./uploader.ts";
import { decoder, StoreError, type ObjectStore } from "./store.ts";

export type Download = { lines: string[]; native: string[][] };

/**
 * A manifest is applied only to the session it was written for: a checkpoint file copied into
 * another session's folder (or another tenant's) names that session, and its objects live under
 * that session's keys. Restore also holds the manifest to the checkpoint it was asked for.
 */
export function checkManifestFor(m: Manifest, session: { id: string; tenant: string }, checkpoint?: string): void {
  if (m.session.id !== session.id || m.session.tenant !== session.tenant) throw new StoreError("the stored manifest names another session");
  if (checkpoint !== undefined && m.checkpoint?.id !== checkpoint) throw new StoreError(`the stored manifest of checkpoint ${checkpoint} names another checkpoint`);
  const last = m.checkpoints.at(-1);
  if (m.checkpoint && (last?.id !== m.checkpoint.id || last.offset !== m.checkpoint.offset)) throw new StoreError("the stored manifest's checkpoint is not its last");
  if (m.checkpoints.some((c, i) => i > 0 && c.offset <= m.checkpoints[i - 1]!.offset)) throw new StoreError("the stored manifest's checkpoints are not in history order");
}

/**
 * Restore replaces state this session wrote itself: where the session still records the checkpoint
 * asked for (always, unless local state was lost), the manifest must say what the session
 * recorded: the same checkpoints up to it, their offsets and native objects (and hashes). An
 * edited manifest (an offset moved, a checkpoint dropped, a hash removed) is refused. Blocks are
 * not compared: after a restore the session re-uploads a tail as a block of its own, while older
 * manifests still (rightly) name the block that covered it.
 */
export function checkManifestAgainstLocal(s: SessionState, m: Manifest): void {
  const sql = s.storage.sql;
  const local = sql
    .exec<{ id: string; event_offset: number; native_key: string | null; native_records: number | null; native_hash: string | null }>(
      "SELECT id, event_offset, native_key, native_records, native_hash FROM checkpoints ORDER BY event_offset",
    )
    .toArray();
  const upTo = local.findIndex((c) => c.id === m.checkpoint?.id);
  if (upTo < 0) return;
  const differs = (c: (typeof local)[number], x: Manifest["checkpoints"][number] | undefined) =>
    !x ||
    x.id !== c.id ||
    x.offset !== c.event_offset ||
    (c.native_key !== null && x.native !== c.native_key) ||
    (c.native_records !== null && x.records !== c.native_records) ||
    (c.native_hash !== null && x.sha256 !== c.native_hash);
  if (m.checkpoints.length !== upTo + 1 || local.slice(0, upTo + 1).some((c, i) => differs(c, m.checkpoints[i]))) {
    throw new StoreError("the stored manifest does not match this session's own record of its checkpoints");
  }
}

/**
 * The history lines up to the checkpoint's offset and each checkpoint's native records. Every key
 * must be the one this session's layout gives (no object of another session is read, so none is
 * later deleted as cut off), and every object must be the bytes uploaded: a block's key carries
 * its SHA-256, a native object's manifest entry does (`sha256`, when it was recorded).
 */
export async function download(store: ObjectStore, m: Manifest, layout: Layout): Promise<Download> {
  const offset = m.checkpoint?.offset ?? 0;
  const lines: string[] = [];
  // Every checkpoint offset must end an event (line): an offset inside one would cut it.
  const ends = new Set([offset, ...m.checkpoints.map((c) => c.offset)].filter((o) => o > 0));
  let at = 0;
  for (const b of m.history) {
    if (b.start !== at) throw new StoreError(`history block ${b.key} starts at ${b.start}, expected ${at}`);
    if (!layout.isBlock(b.key, b.start, b.end)) throw new StoreError(`history block ${b.key} is not a key of this session's blocks`);
    const text = await required(store, b.key);
    if (b.key !== layout.block(b.start, b.end, contentHash(text))) throw new StoreError(`history block ${b.key} does not hold the bytes its key names (SHA-256 differs)`);
    for (const line of text.split("\n").slice(0, -1)) {
      at += new TextEncoder().encode(line).byteLength + 1;
      ends.delete(at);
      if (at <= offset) lines.push(line);
    }
    if (at !== b.end) throw new StoreError(`history block ${b.key} does not end at ${b.end}`);
  }
  if (at < offset) throw new StoreError(`the history in storage ends at ${at}, before the checkpoint at ${offset}`);
  if (ends.size > 0) throw new StoreError(`checkpoint offset ${[...ends][0]} does not end an event of the stored history`);
  const native: string[][] = [];
  for (const c of m.checkpoints) {
    if (c.native !== layout.native(c.id)) throw new StoreError(`native object ${c.native} is not this session's object of checkpoint ${c.id}`);
    const text = await required(store, c.native);
    if (c.sha256 !== undefined && contentHash(text) !== c.sha256) throw new StoreError(`native object ${c.native} is not the one uploaded (SHA-256 differs)`);
    const records = text.split("\n").slice(0, -1);
    if (records.length !== c.records) throw new StoreError(`native object ${c.native} holds ${records.length} records, expected ${c.records}`);
    native.push(records);
  }
  return { lines, native };
}

async function required(store: ObjectStore, key: string): Promise<string> {
  const bytes = await store.get(key);
  if (!bytes) throw new StoreError(`object ${key} named by a manifest is missing`);
  return decoder.decode(bytes);
}

/**
 * Whether the downloaded history ends with the session closed: a close makes the session's last
 * checkpoint (src/session/turns.ts `closeCheckpoint`), so its history holds the close.
 */
export function endsClosed(d: Download): boolean {
  for (let i = d.lines.length - 1; i >= 0; i--) {
    const e = JSON.parse(d.lines[i]!) as { type: string; data: { status?: unknown } };
    if (e.type === "session.status") return e.data.status === "closed";
  }
  return false;
}

/**
 * Replaces history, native state and checkpoints with the download. `load` also writes the session
 * row from the manifest, `idle` (`closed` when the history ends closed), in a new log epoch (the
 * history past the checkpoint is gone, as after a restore); `restore` keeps the row,
 * moves to a new log epoch (cursors past the cut stop working) and leaves the session `idle`.
 * The keys that only the cut-off tail used are recorded in `sync_orphans`, for the uploader to
 * delete once latest.json no longer names them (a restore finds them in its own record). A load is
 * given what it found past its checkpoint (`strays`, strays.ts) and holds it in `sync_strays`
 * until this session writes latest.json itself (uploader.ts).
 */
export function apply(s: SessionState, layout: Layout, m: Manifest, d: Download, mode: "load" | "restore", now: string, storage: string, strays: string[] = []): void {
  const sql = s.storage.sql;
  const offset = m.checkpoint?.offset ?? 0;
  const kept = keptBlocks(m.history, offset);
  s.storage.transactionSync(() => {
    const orphans: string[] = [];
    if (mode === "restore") {
      const r = s.require();
      // Checkpoints known locally are ancestors: cursors up to the cut stay valid. Otherwise none do.
      const local = sql.exec("SELECT 1 FROM checkpoints WHERE id = ?", m.checkpoint?.id ?? "").toArray().length > 0;
      const cutSeq = local ? s.log.countUntil(offset) : 0;
      sql.exec("INSERT OR REPLACE INTO epoch_cuts (epoch, last_seq) VALUES (?, ?)", r.epoch, cutSeq);
      const restored = new Set(m.checkpoints.map((c) => c.id));
      for (const b of sql.exec<{ key: string; start: number }>("SELECT key, start FROM sync_blocks WHERE start >= ?", offset)) orphans.push(b.key);
      for (const c of sql.exec<{ id: string; native_key: string | null; published: number }>("SELECT id, native_key, published FROM checkpoints")) {
        if (restored.has(c.id)) continue;
        if (c.native_key) orphans.push(c.native_key);
        if (c.published) orphans.push(layout.checkpoint(c.id));
      }
      sql.exec("UPDATE session SET epoch = epoch + 1, log_bytes = 0, status = 'idle', updated_at = ?, version = version + 1", now);
    } else {
      for (const key of strays) sql.exec("INSERT OR IGNORE INTO sync_strays (key) VALUES (?)", key);
      const x = m.session;
      const loaded = endsClosed(d) ? "closed" : "idle";
      sql.exec(
        `INSERT INTO session (id, tenant, harness, config, status, created_at, updated_at, descriptors, credential_bindings, cursor_key, epoch, bindings)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        x.id,
        x.tenant,
        x.harness,
        JSON.stringify(x.config),
        loaded,
        x.created_at,
        // A load that changes the status as stored (a turn interrupted after the last checkpoint) is
        // a change here: `updated_at` says when. Otherwise the session is as it was.
        x.status === undefined || x.status === loaded ? x.updated_at : now,
        JSON.stringify(x.descriptors),
        x.credential_bindings ? JSON.stringify(x.credential_bindings) : null,
        m.cursor_key,
        // A new epoch, cut where the stored history ends: cursors the client holds up to there keep
        // working, and those of a tail that never reached storage give 409 instead of naming the
        // new events that will take their positions.
        m.epoch + 1,
        JSON.stringify(x.bindings ?? []),
      );
      for (const c of m.epoch_cuts) sql.exec("INSERT INTO epoch_cuts (epoch, last_seq) VALUES (?, ?)", c.epoch, c.last_seq);
      sql.exec("INSERT INTO epoch_cuts (epoch, last_seq) VALUES (?, ?)", m.epoch, d.lines.length);
      for (const c of m.credentials) sql.exec("INSERT INTO credentials (alias, key_id, iv, ciphertext) VALUES (?, ?, ?, ?)", c.alias, c.key_id, c.iv, c.ciphertext);
    }
    for (const t of ["events", "event_chunks", "native", "checkpoints", "inputs", "open_calls", "runtime_calls", "sync_blocks", "idem_keys"]) sql.exec(`DELETE FROM ${t}`);
    const unstarted = new Set<string>();
    let status: unknown;
    for (const line of d.lines) {
      const e = JSON.parse(line) as { id: string; type: string; time: string; data: Record<string, unknown>; input_id?: string };
      const logged = s.append({ type: e.type, data: e.data, input_id: e.input_id }, e.time, e.id);
      // The keys of the messages the history keeps come back with it; those of the cut-off tail do not.
      if (e.type === "user.message" && typeof e.data.key === "string") s.rememberKey(e.data.key, String(e.data.text), logged.seq);
      if (e.type === "user.message") unstarted.add(e.id);
      else if (e.input_id) unstarted.delete(e.input_id);
      if (e.type === "session.status") status = e.data.status;
    }
    // Messages accepted while the checkpoint's turn ran, queued behind it, are in the history but
    // never ran there, and the queue is not part of a checkpoint: each ends as a queued input that
    // was interrupted before execution, and the session (which the history leaves `running`)
    // becomes idle, as the row already says. Without this they stayed without an outcome.
    const why = mode === "restore" ? "the session was restored to a checkpoint taken before it ran" : "the session was loaded from a checkpoint taken before it ran";
    for (const id of unstarted) s.append({ type: "session.error", data: { code: "conflict", message: `the queued input was interrupted before execution: ${why}` }, input_id: id }, now);
    if (unstarted.size > 0) s.set({ updated_at: now });
    const row = s.require().status;
    if ((unstarted.size > 0 || status === "running") && status !== row) s.append({ type: "session.status", data: { status: row } }, now);
    let nativeSeq = 0;
    m.checkpoints.forEach((c, i) => {
      for (const record of d.native[i]!) {
        sql.exec("INSERT INTO native (seq, record, bytes) VALUES (?, ?, ?)", ++nativeSeq, record, new TextEncoder().encode(record).byteLength);
      }
      sql.exec(
        "INSERT INTO checkpoints (id, event_offset, native_seq, time, native_key, native_records, native_hash, published) VALUES (?, ?, ?, ?, ?, ?, ?, 1)",
        c.id,
        c.offset,
        nativeSeq,
        c.time,
        c.native,
        c.records,
        c.sha256 ?? null,
      );
    });
    sql.exec("UPDATE session SET checkpoint = ?", m.checkpoint ? JSON.stringify(m.checkpoint) : null);
    for (const b of kept) sql.exec("INSERT INTO sync_blocks (start, end_offset, key) VALUES (?, ?, ?)", b.start, b.end, b.key);
    const last = m.checkpoints.at(-1);
    const published: Published | null = m.checkpoint && last ? { checkpoint: last.id, native: last.native, offset, time: now } : null;
    // A restore must repoint latest.json; either way the part of the history between the last whole
    // block and the checkpoint is uploaded again as a block of its own. The caller marks it dirty.
    sql.exec(
      `INSERT OR REPLACE INTO sync (one, uploaded_offset, inflight, dirty_at, failures, retry_at, error, published, latest_stale, queued, storage)
       VALUES (1, ?, NULL, NULL, 0, NULL, NULL, ?, ?, COALESCE((SELECT queued FROM sync), 0), ?)`,
      kept.at(-1)?.end ?? 0,
      published ? JSON.stringify(published) : null,
      mode === "restore" ? 1 : 0,
      storage,
    );
    for (const key of orphans) sql.exec("INSERT OR IGNORE INTO sync_orphans (key) VALUES (?)", key);
    // What this state names is never deleted, whatever an earlier restore had cut off.
    for (const key of [...kept.map((b) => b.key), ...m.checkpoints.flatMap((c) => [c.native, layout.checkpoint(c.id)])]) {
      sql.exec("DELETE FROM sync_orphans WHERE key = ?", key);
    }
  });
}

/** Blocks wholly inside the first `offset` bytes. */
function keptBlocks(history: BlockRef[], offset: number): BlockRef[] {
  return history.filter((b) => b.end <= offset);
}
