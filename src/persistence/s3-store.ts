/**
 * `s3` and `r2` (without a bound bucket) through the S3 API, signed with SigV4 by aws4fetch.
 * Path-style addressing (`<endpoint>/<bucket>/<key>`) whenever an endpoint is configured, which is
 * what R2's S3 endpoint and S3-compatible servers expect; virtual-hosted AWS addressing otherwise.
 */
import { AwsClient } from "aws4fetch";
import { answerBytes, callFailure, decoder, httpFailure, LIST_PAGE, STORE_REQUEST_MS, StoreError, type ObjectStore } from "./store.ts";

export type S3Options = {
  kind: "s3" | "r2";
  bucket: string;
  region: string;
  endpoint?: string;
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  /** Sends the signed request; the global `fetch` when left out (tests see the requests through it). */
  fetch?: (request: Request) => Promise<Response>;
  /** Bound on each call, answer included, ms (default STORE_REQUEST_MS). */
  timeoutMs?: number;
  /** Keys per list call (default LIST_PAGE). */
  listPage?: number;
};

export class S3Store implements ObjectStore {
  readonly kind: string;
  readonly #client: AwsClient;
  readonly #base: string;
  readonly #fetch: (request: Request) => Promise<Response>;
  readonly #timeoutMs: number;
  readonly #page: number;

  constructor(o: S3Options) {
    this.kind = o.kind;
    this.#timeoutMs = o.timeoutMs ?? STORE_REQUEST_MS;
    this.#page = o.listPage ?? LIST_PAGE;
    this.#fetch = o.fetch ?? ((request) => fetch(request));
    // With a custom endpoint aws4fetch cannot infer service and region from the host: pass both.
    this.#client = new AwsClient({
      accessKeyId: o.accessKeyId,
      secretAccessKey: o.secretAccessKey,
      sessionToken: o.sessionToken,
      service: "s3",
      region: o.region,
      retries: 0,
    });
    this.#base = o.endpoint
      ? `${o.endpoint.replace(/\/+$/, "")}/${encodeURIComponent(o.bucket)}`
      : `https://${o.bucket}.s3.${o.region}.amazonaws.com`;
  }

  #url(key: string): string {
    return `${this.#base}/${key.split("/").map(encodeURIComponent).join("/")}`;
  }

  async #send(key: string, init: RequestInit, url = this.#url(key)): Promise<Response> {
    try {
      const signed = await this.#client.sign(url, init);
      return await this.#fetch(new Request(signed, { signal: AbortSignal.timeout(this.#timeoutMs) }));
    } catch (e) {
      throw callFailure(`${this.kind} ${init.method ?? "GET"} ${key}`, e, this.#timeoutMs);
    }
  }

  async create(key: string, body: Uint8Array, type: string): Promise<void> {
    const res = await this.#send(key, { method: "PUT", body, headers: { "Content-Type": type, "If-None-Match": "*" } });
    // 412: the object exists already, which for an immutable object is the same outcome.
    if (res.ok || res.status === 412) return void (await res.body?.cancel());
    throw await httpFailure(`${this.kind} PUT ${key}`, res);
  }

  async put(key: string, body: Uint8Array, type: string): Promise<void> {
    const res = await this.#send(key, { method: "PUT", body, headers: { "Content-Type": type } });
    if (res.ok) return void (await res.body?.cancel());
    throw await httpFailure(`${this.kind} PUT ${key}`, res);
  }

  async get(key: string): Promise<Uint8Array | null> {
    const res = await this.#send(key, { method: "GET" });
    if (res.status === 404) {
      await res.body?.cancel();
      return null;
    }
    if (!res.ok) throw await httpFailure(`${this.kind} GET ${key}`, res);
    return answerBytes(`${this.kind} GET ${key}`, res, this.#timeoutMs);
  }

  async delete(key: string): Promise<void> {
    const res = await this.#send(key, { method: "DELETE" });
    if (res.ok || res.status === 404) return void (await res.body?.cancel());
    throw await httpFailure(`${this.kind} DELETE ${key}`, res);
  }

  /** ListObjectsV2, page after page (`continuation-token`). */
  async list(prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      // Percent-encoded (a space as %20, never `+`): S3 reads the query as RFC 3986, and the
      // signature is computed over it the same way.
      const q = Object.entries({ "list-type": "2", prefix, "max-keys": String(this.#page), ...(token ? { "continuation-token": token } : {}) });
      const res = await this.#send(`${prefix} (list)`, { method: "GET" }, `${this.#base}?${q.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&")}`);
      if (!res.ok) throw await httpFailure(`${this.kind} list ${prefix}`, res);
      const xml = decoder.decode(await answerBytes(`${this.kind} list ${prefix}`, res, this.#timeoutMs));
      for (const m of xml.matchAll(/<Key>([^<]*)<\/Key>/g)) keys.push(xmlText(m[1]!));
      const truncated = /<IsTruncated>\s*true\s*<\/IsTruncated>/.test(xml);
      token = truncated ? xmlText(/<NextContinuationToken>([^<]*)<\/NextContinuationToken>/.exec(xml)?.[1] ?? "") : undefined;
      if (truncated && !token) throw new StoreError(`${this.kind} list ${prefix}: a truncated page without a continuation token`);
    } while (token);
    return keys;
  }
}

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

/** An XML element's text: the five named entities and numeric character references decoded. */
function xmlText(s: string): string {
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (whole, e: string) => {
    if (e.startsWith("#x")) return String.fromCodePoint(parseInt(e.slice(2), 16));
    if (e.startsWith("#")) return String.fromCodePoint(parseInt(e.slice(1), 10));
    return ENTITIES[e] ?? whole;
  });
}
