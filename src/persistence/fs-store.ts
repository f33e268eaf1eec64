/**
 * `filesystem`: plain files under `directory`/`prefix`, written by the Node process that runs the
 * local stack. The Worker reaches it through the service binding PERSISTENCE_FS, a function the
 * local stack registers with Miniflare (runner-host/cli/persistence-fs.ts). A deployed Worker has no
 * such binding, which is why `svc deploy` refuses this provider.
 *
 * Wire: `PUT /o/<key>` (header `If-None-Match: *` to create only), `GET /o/<key>`,
 * `DELETE /o/<key>`, `GET /list?prefix=<prefix>` (`{"keys": [...]}`, one answer: the files are
 * local); 404 for a missing object, 5xx with a message for a failure.
 */
import * as z from "zod";
import { answerBytes, callFailure, httpFailure, jsonPage, STORE_REQUEST_MS, type ObjectStore } from "./store.ts";

/** The file service's list answer. */
const ListSchema = z.strictObject({ keys: z.array(z.string()) });

export const FS_BINDING = "PERSISTENCE_FS";

/** What the store needs of the binding (a Worker `Fetcher`). */
export type FileService = { fetch(input: string, init?: RequestInit): Promise<Response> };

export class FsStore implements ObjectStore {
  readonly kind = "filesystem";
  readonly #service: FileService;

  constructor(service: FileService) {
    this.#service = service;
  }

  async #send(key: string, init: RequestInit, url = `http://persistence-fs/o/${key.split("/").map(encodeURIComponent).join("/")}`): Promise<Response> {
    try {
      return await this.#service.fetch(url, { ...init, signal: AbortSignal.timeout(STORE_REQUEST_MS) });
    } catch (e) {
      throw callFailure(`filesystem ${init.method} ${key}`, e, STORE_REQUEST_MS);
    }
  }

  async create(key: string, body: Uint8Array, type: string): Promise<void> {
    const res = await this.#send(key, { method: "PUT", body, headers: { "Content-Type": type, "If-None-Match": "*" } });
    if (res.ok || res.status === 412) return void (await res.body?.cancel());
    throw await httpFailure(`filesystem write ${key}`, res);
  }

  async put(key: string, body: Uint8Array, type: string): Promise<void> {
    const res = await this.#send(key, { method: "PUT", body, headers: { "Content-Type": type } });
    if (res.ok) return void (await res.body?.cancel());
    throw await httpFailure(`filesystem write ${key}`, res);
  }

  async get(key: string): Promise<Uint8Array | null> {
    const res = await this.#send(key, { method: "GET" });
    if (res.status === 404) {
      await res.body?.cancel();
      return null;
    }
    if (!res.ok) throw await httpFailure(`filesystem read ${key}`, res);
    return answerBytes(`filesystem read ${key}`, res, STORE_REQUEST_MS);
  }

  async delete(key: string): Promise<void> {
    const res = await this.#send(key, { method: "DELETE" });
    if (res.ok || res.status === 404) return void (await res.body?.cancel());
    throw await httpFailure(`filesystem delete ${key}`, res);
  }

  async list(prefix: string): Promise<string[]> {
    const res = await this.#send(`${prefix} (list)`, { method: "GET" }, `http://persistence-fs/list?${new URLSearchParams({ prefix })}`);
    if (!res.ok) throw await httpFailure(`filesystem list ${prefix}`, res);
    return (await jsonPage(`filesystem list ${prefix}`, res, STORE_REQUEST_MS, ListSchema)).keys;
  }
}
