/**
 * Private credential overrides (docs/api.md "Sessions", "Credential overrides"): AES-256-GCM with the
 * active `credential_keys` key; the additional data binds each ciphertext to its tenant, session
 * and alias, so a ciphertext copied anywhere else fails to decrypt. Values never leave encrypted
 * except toward the tool call that uses them.
 */
import type { HostConfig } from "../shared/config-schema.ts";
import { invalid, unsupported } from "../shared/errors.ts";
import type { EncryptedCredential } from "./record.ts";
import { fromBase64, toBase64 } from "../shared/base64.ts";
import { aesKeyProblem } from "../shared/config-env.ts";
import { credentialHeaderProblem, HEADER_NAME, sendableValue, SENDABLE_VALUE_RULE } from "../shared/credential-headers.ts";


/**
 * docs/api.md: a string is a bearer token; `{"headers": {...}}` supplies request headers. `host`: the
 * binding is not an executor's alone: the service makes requests with it, so headers the service or
 * the HTTP client sets are refused (an executor gets the headers as data).
 */
export function checkCredentialValue(alias: string, value: unknown, host: boolean): void {
  if (typeof value === "string") {
    if (value.length === 0) throw invalid(`credentials for "${alias}": value must not be empty`);
    if (!sendableValue(value)) throw invalid(`credentials for "${alias}": value must be usable in an HTTP header as given (${SENDABLE_VALUE_RULE})`);
    return;
  }
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const keys = Object.keys(value);
    const headers = (value as { headers?: unknown }).headers;
    if (keys.length === 1 && typeof headers === "object" && headers !== null && !Array.isArray(headers)) {
      const entries = Object.entries(headers);
      if (entries.length > 0 && entries.every(([k, v]) => HEADER_NAME.test(k) && typeof v === "string")) {
        if (!entries.every(([, v]) => sendableValue(v as string))) {
          throw invalid(`credentials for "${alias}": header values must be usable in an HTTP header as given (${SENDABLE_VALUE_RULE})`);
        }
        const problem = host ? credentialHeaderProblem(headers as Record<string, string>) : undefined;
        if (problem) throw invalid(`credentials for "${alias}": ${problem}`);
        return;
      }
    }
  }
  throw invalid(
    `credentials for "${alias}": value must be a bearer token string or {"headers": {name: string}}`,
  );
}

export function credentialAad(tenant: string, sessionId: string, alias: string): Uint8Array {
  return new TextEncoder().encode(`svc-credential\u0000${tenant}\u0000${sessionId}\u0000${alias}`);
}

export async function encryptCredential(
  config: HostConfig,
  vars: Record<string, string | undefined>,
  binding: { tenant: string; sessionId: string; alias: string },
  value: unknown,
): Promise<EncryptedCredential> {
  const keys = config.credential_keys;
  if (!keys) throw unsupported("credential overrides need credential_keys in the host configuration");
  const key = await importKey(keys.active, vars[keys.keys[keys.active]!]);
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ct = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: credentialAad(binding.tenant, binding.sessionId, binding.alias) },
    key,
    new TextEncoder().encode(JSON.stringify(value)),
  );
  return { alias: binding.alias, key_id: keys.active, iv: toBase64(iv), ciphertext: toBase64(new Uint8Array(ct)) };
}

export async function decryptCredential(
  config: HostConfig,
  vars: Record<string, string | undefined>,
  binding: { tenant: string; sessionId: string },
  c: EncryptedCredential,
): Promise<unknown> {
  const varName = config.credential_keys?.keys[c.key_id];
  if (!varName) throw new Error(`credential key "${c.key_id}" is not configured`);
  const key = await importKey(c.key_id, vars[varName]);
  let pt: ArrayBuffer;
  try {
    pt = await crypto.subtle.decrypt(
      { name: "AES-GCM", iv: fromBase64(c.iv), additionalData: credentialAad(binding.tenant, binding.sessionId, c.alias) },
      key,
      fromBase64(c.ciphertext),
    );
  } catch {
    // For the operator's log: the key, and why (GCM's check failed: another key value, or another
    // session's record). No key material is in the message.
    throw new Error(`credential key "${c.key_id}": its value does not decrypt the override (it changed)`);
  }
  return JSON.parse(new TextDecoder().decode(pt));
}

/**
 * AES-256 only: WebCrypto would take a 16- or 24-byte key as AES-128/192 without a word, so the
 * length is checked here as `-check` checks it. A bad key is a deployment fault (a 500, logged).
 */
function importKey(id: string, base64: string | undefined): ReturnType<typeof crypto.subtle.importKey> {
  const problem = aesKeyProblem(base64);
  if (problem) throw new Error(`credential key "${id}": its variable ${problem}`);
  return crypto.subtle.importKey("raw", fromBase64(base64!), "AES-GCM", false, ["encrypt", "decrypt"]);
}
