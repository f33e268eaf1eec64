/**
 * `gcs` through the Cloud Storage JSON API with a service-account credential.
 *
 * The `gcs` settings take no key variables (docs/configuration.md "Persistence"), so the
 * credential is the service account's JSON key file, held whole in the environment variable
 * GCS_SERVICE_ACCOUNT (a Worker secret when deployed). The uploader signs an RS256 JWT with its private key (WebCrypto), exchanges it at the
 * key file's `token_uri` for an access token (cached until a minute before it expires) and sends
 * that as a bearer token. STORAGE_EMULATOR_HOST (the official clients' convention) points the API
 * at another base URL, for a local emulator.
 */
import * as z from "zod";
import { fromBase64, toBase64Url } from "../shared/base64.ts";
import { answerBytes, callFailure, encoder, httpFailure, jsonPage, LIST_PAGE, STORE_REQUEST_MS, StoreError, type ObjectStore } from "./store.ts";

const API = "https://storage.googleapis.com";
const SCOPE = "https://www.googleapis.com/auth/devstorage.read_write";
/** Lifetime asked for the signed assertion, seconds (Google's maximum is one hour). */
const ASSERTION_SECONDS = 3600;
/** An access token is renewed this long before it expires, ms. */
const TOKEN_MARGIN_MS = 60_000;

export const ServiceAccountSchema = z.looseObject({
  client_email: z.string().min(1),
  private_key: z.string().includes("PRIVATE KEY"),
  token_uri: z.url().default("https://oauth2.googleapis.com/token"),
});
export type ServiceAccount = z.output<typeof ServiceAccountSchema>;

/** Why the variable's value is not a usable service-account key, or undefined. */
export function serviceAccountProblem(text: string | undefined): string | undefined {
  if (text === undefined || text === "") return "is not set";
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return "is not a JSON service-account key";
  }
  const r = ServiceAccountSchema.safeParse(json);
  return r.success ? undefined : "lacks client_email, private_key or a valid token_uri";
}

export class GcsStore implements ObjectStore {
  readonly kind = "gcs";
  readonly #bucket: string;
  readonly #api: string;
  readonly #account: ServiceAccount | undefined;
  #token: { value: string; until: number } | undefined;
  readonly #timeoutMs: number;
  readonly #page: number;

  /** `timeoutMs`: bound on each call, answer included (default STORE_REQUEST_MS); `listPage`: keys per list call (default LIST_PAGE). */
  constructor(o: { bucket: string; credential?: string; emulator?: string; timeoutMs?: number; listPage?: number }) {
    this.#bucket = o.bucket;
    this.#timeoutMs = o.timeoutMs ?? STORE_REQUEST_MS;
    this.#page = o.listPage ?? LIST_PAGE;
    this.#api = (o.emulator ? (/^https?:\/\//.test(o.emulator) ? o.emulator : `http://${o.emulator}`) : API).replace(/\/+$/, "");
    this.#account = o.credential ? ServiceAccountSchema.parse(JSON.parse(o.credential)) : undefined;
  }

  #object(key: string): string {
    return `${this.#api}/storage/v1/b/${encodeURIComponent(this.#bucket)}/o/${encodeURIComponent(key)}`;
  }

  async #headers(): Promise<Record<string, string>> {
    if (!this.#account) return {};
    if (!this.#token || Date.now() > this.#token.until) this.#token = await fetchToken(this.#account, this.#timeoutMs);
    return { Authorization: `Bearer ${this.#token.value}` };
  }

  async #send(what: string, url: string, init: RequestInit): Promise<Response> {
    try {
      const headers = { ...(await this.#headers()), ...(init.headers as Record<string, string> | undefined) };
      return await fetch(url, { ...init, headers, signal: AbortSignal.timeout(this.#timeoutMs) });
    } catch (e) {
      throw callFailure(`gcs ${what}`, e, this.#timeoutMs);
    }
  }

  async #upload(key: string, body: Uint8Array, type: string, onlyNew: boolean): Promise<void> {
    const q = new URLSearchParams({ uploadType: "media", name: key });
    // ifGenerationMatch=0: create only if no live object has that name.
    if (onlyNew) q.set("ifGenerationMatch", "0");
    const url = `${this.#api}/upload/storage/v1/b/${encodeURIComponent(this.#bucket)}/o?${q}`;
    const res = await this.#send(`upload ${key}`, url, { method: "POST", body, headers: { "Content-Type": type } });
    if (res.ok || (onlyNew && res.status === 412)) return void (await res.body?.cancel());
    throw await httpFailure(`gcs upload ${key}`, res);
  }

  create(key: string, body: Uint8Array, type: string): Promise<void> {
    return this.#upload(key, body, type, true);
  }

  put(key: string, body: Uint8Array, type: string): Promise<void> {
    return this.#upload(key, body, type, false);
  }

  async get(key: string): Promise<Uint8Array | null> {
    const res = await this.#send(`get ${key}`, `${this.#object(key)}?alt=media`, { method: "GET" });
    if (res.status === 404) {
      await res.body?.cancel();
      return null;
    }
    if (!res.ok) throw await httpFailure(`gcs get ${key}`, res);
    return answerBytes(`gcs get ${key}`, res, this.#timeoutMs);
  }

  async delete(key: string): Promise<void> {
    const res = await this.#send(`delete ${key}`, this.#object(key), { method: "DELETE" });
    if (res.ok || res.status === 404) return void (await res.body?.cancel());
    throw await httpFailure(`gcs delete ${key}`, res);
  }

  /** `objects.list`, page after page (`pageToken`), names only. */
  async list(prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const q = new URLSearchParams({ prefix, maxResults: String(this.#page), fields: "items(name),nextPageToken" });
      if (token) q.set("pageToken", token);
      const url = `${this.#api}/storage/v1/b/${encodeURIComponent(this.#bucket)}/o?${q}`;
      const res = await this.#send(`list ${prefix}`, url, { method: "GET" });
      if (!res.ok) throw await httpFailure(`gcs list ${prefix}`, res);
      const page = await jsonPage(`gcs list ${prefix}`, res, this.#timeoutMs, ListPageSchema);
      for (const o of page.items ?? []) keys.push(o.name);
      token = page.nextPageToken;
    } while (token);
    return keys;
  }
}

const ListPageSchema = z.looseObject({ items: z.array(z.looseObject({ name: z.string() })).optional(), nextPageToken: z.string().min(1).optional() });

/** OAuth 2.0 JWT bearer grant (RFC 7523) with the service account's RS256 key. */
async function fetchToken(a: ServiceAccount, timeoutMs: number): Promise<{ value: string; until: number }> {
  const now = Math.floor(Date.now() / 1000);
  const part = (o: unknown) => toBase64Url(encoder.encode(JSON.stringify(o)));
  const unsigned = `${part({ alg: "RS256", typ: "JWT" })}.${part({ iss: a.client_email, scope: SCOPE, aud: a.token_uri, iat: now, exp: now + ASSERTION_SECONDS })}`;
  const der = fromBase64(a.private_key.replace(/-----[^-]+-----/g, "").replace(/\s+/g, ""));
  const key = await crypto.subtle.importKey("pkcs8", der, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, false, ["sign"]);
  const signature = new Uint8Array(await crypto.subtle.sign("RSASSA-PKCS1-v1_5", key, encoder.encode(unsigned)));
  const res = await fetch(a.token_uri, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion: `${unsigned}.${toBase64Url(signature)}` }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (!res.ok) throw await httpFailure("gcs token exchange", res);
  const body = (await res.json()) as { access_token?: unknown; expires_in?: unknown };
  if (typeof body.access_token !== "string") throw new StoreError("gcs token exchange: no access_token in the answer");
  const seconds = typeof body.expires_in === "number" ? body.expires_in : 3600;
  return { value: body.access_token, until: Date.now() + seconds * 1000 - TOKEN_MARGIN_MS };
}
