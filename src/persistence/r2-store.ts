/** `r2` through the Worker's R2 binding (`PERSISTENCE`), when the deployment binds a bucket. */
import { callFailure, LIST_PAGE, STORE_REQUEST_MS, type ObjectStore } from "./store.ts";

/** What the store needs of an R2 bucket binding (a Worker `R2Bucket`). */
export type R2BucketLike = {
  put(key: string, value: Uint8Array, options: { onlyIf?: Headers; httpMetadata: { contentType: string } }): Promise<unknown>;
  get(key: string): Promise<{ arrayBuffer(): Promise<ArrayBuffer> } | null>;
  delete(key: string): Promise<void>;
  list(options: { prefix: string; limit: number; cursor?: string }): Promise<{ objects: { key: string }[]; truncated: boolean; cursor?: string }>;
};

export class R2Store implements ObjectStore {
  readonly kind = "r2";
  readonly #bucket: R2BucketLike;
  readonly #page: number;

  /** `listPage`: keys per list call (LIST_PAGE unless a test asks for pages of its own size). */
  constructor(bucket: R2BucketLike, listPage = LIST_PAGE) {
    this.#bucket = bucket;
    this.#page = listPage;
  }

  /** A binding call cannot be aborted; past STORE_REQUEST_MS it is left to finish and the call fails. */
  async #call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    const signal = AbortSignal.timeout(STORE_REQUEST_MS);
    const late = new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
    late.catch(() => {}); // it rejects after the call too, when nothing waits on it any more
    try {
      return await Promise.race([fn(), late]);
    } catch (e) {
      throw callFailure(`r2 ${what}`, e, STORE_REQUEST_MS);
    }
  }

  async create(key: string, body: Uint8Array, type: string): Promise<void> {
    // `If-None-Match: *`: null (precondition failed) means the object exists, which is success.
    await this.#call(`put ${key}`, () =>
      this.#bucket.put(key, body, { onlyIf: new Headers({ "If-None-Match": "*" }), httpMetadata: { contentType: type } }),
    );
  }

  async put(key: string, body: Uint8Array, type: string): Promise<void> {
    await this.#call(`put ${key}`, () => this.#bucket.put(key, body, { httpMetadata: { contentType: type } }));
  }

  async get(key: string): Promise<Uint8Array | null> {
    return this.#call(`get ${key}`, async () => {
      const o = await this.#bucket.get(key);
      return o ? new Uint8Array(await o.arrayBuffer()) : null;
    });
  }

  async delete(key: string): Promise<void> {
    await this.#call(`delete ${key}`, () => this.#bucket.delete(key));
  }

  async list(prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.#call(`list ${prefix}`, () => this.#bucket.list({ prefix, limit: this.#page, ...(cursor ? { cursor } : {}) }));
      for (const o of page.objects) keys.push(o.key);
      cursor = page.truncated ? page.cursor : undefined;
    } while (cursor);
    return keys;
  }
}
