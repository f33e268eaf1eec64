/** The session metadata row and its public `Session` shape. */
import type { StoredBinding } from "./bindings.ts";
import type { Checkpoint, Session, SessionConfig, SessionStatus, Tool } from "../shared/api-schema.ts";

export type SessionRow = {
  id: string;
  tenant: string;
  harness: string;
  config: string;
  status: SessionStatus;
  created_at: string;
  updated_at: string;
  descriptors: string;
  checkpoint: string | null;
  credential_bindings: string | null;
  cursor_key: string;
  epoch: number;
  log_bytes: number;
  version: number;
  indexed_version: number;
  lease: number;
  link_state: "none" | "requested" | "opening" | "open";
  up_seq: number;
  down_seq: number;
  link_lost_at: number | null;
  bindings: string;
};

/** What the Worker hands the object at creation, after every creation rule has passed. */
export type NewSession = {
  id: string;
  tenant: string;
  harness: string;
  config: SessionConfig;
  descriptors: Tool[];
  credentials: EncryptedCredential[];
  /** Resolved tool bindings (none when omitted). */
  bindings?: StoredBinding[];
};

export type EncryptedCredential = { alias: string; key_id: string; iv: string; ciphertext: string };

/**
 * `toSession(r)` as JSON text, what the tenant index stores (index-push.ts): spliced from the row's
 * own JSON columns (each written by `JSON.stringify`) without parsing them, so a push does not
 * parse the session's config and tools, hand the objects to the tenant's object, and have them
 * serialized there again. Same members in the same order as `toSession`.
 */
export function sessionJson(r: SessionRow): string {
  const q = JSON.stringify;
  let s = `{"id":${q(r.id)},"harness":${q(r.harness)},"config":${r.config},"status":${q(r.status)},"created_at":${q(r.created_at)},"updated_at":${q(r.updated_at)},"descriptors":${r.descriptors}`;
  if (r.checkpoint) s += `,"checkpoint":${r.checkpoint}`;
  if (r.credential_bindings) s += `,"credential_bindings":${r.credential_bindings}`;
  return `${s}}`;
}

export function toSession(r: SessionRow): Session {
  const s: Session = {
    id: r.id,
    harness: r.harness,
    config: JSON.parse(r.config) as SessionConfig,
    status: r.status,
    created_at: r.created_at,
    updated_at: r.updated_at,
    descriptors: JSON.parse(r.descriptors) as Tool[],
  };
  if (r.checkpoint) s.checkpoint = JSON.parse(r.checkpoint) as Checkpoint;
  if (r.credential_bindings) s.credential_bindings = JSON.parse(r.credential_bindings) as string[];
  return s;
}
