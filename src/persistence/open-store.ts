/**
 * Picks the ObjectStore for the configured provider, once per isolate (docs/configuration.md
 * "Persistence"):
 * - `r2`: the bound bucket PERSISTENCE when the deployment has one; otherwise the S3 API at
 *   `endpoint` with `access_key_env` / `secret_key_env`.
 * - `s3`: the S3 API with `access_key_env` / `secret_key_env`, or else the default chain as far as
 *   it exists inside a Worker: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and optional
 *   AWS_SESSION_TOKEN (secrets). `region` defaults to AWS_REGION, then us-east-1.
 * - `gcs`: the JSON API with the service-account key in GCS_SERVICE_ACCOUNT.
 * - `filesystem`: the local stack's PERSISTENCE_FS service binding.
 */
import type { Persistence } from "../shared/config-schema.ts";
import { GCS_VARS, S3_CHAIN_VARS } from "../shared/config-vars.ts";
import { FS_BINDING, FsStore, type FileService } from "./fs-store.ts";
import { GcsStore } from "./gcs-store.ts";
import { R2Store, type R2BucketLike } from "./r2-store.ts";
import { S3Store } from "./s3-store.ts";
import { StoreError, type ObjectStore } from "./store.ts";

export const R2_BINDING = "PERSISTENCE";
const [AWS_KEY, AWS_SECRET, AWS_TOKEN, AWS_REGION] = S3_CHAIN_VARS;

const cache = new WeakMap<Persistence, ObjectStore>();

/** `env`: the Worker's bindings (only PERSISTENCE and PERSISTENCE_FS are looked at). */
export function openStore(env: Record<string, unknown>, p: Persistence, vars: Record<string, string | undefined>): ObjectStore {
  let store = cache.get(p);
  if (!store) {
    store = build(env, p, vars);
    cache.set(p, store);
  }
  return store;
}

function build(env: Record<string, unknown>, p: Persistence, vars: Record<string, string | undefined>): ObjectStore {
  switch (p.provider) {
    case "filesystem": {
      const service = env[FS_BINDING] as FileService | undefined;
      if (!service) throw new StoreError("the filesystem provider works only in the local stack (no PERSISTENCE_FS binding)");
      return new FsStore(service);
    }
    case "r2": {
      const bucket = env[R2_BINDING] as R2BucketLike | undefined;
      if (bucket && typeof bucket.put === "function") return new R2Store(bucket);
      return new S3Store({
        kind: "r2",
        bucket: p.bucket!,
        region: p.region ?? "auto",
        endpoint: p.endpoint,
        accessKeyId: vars[p.access_key_env!] ?? "",
        secretAccessKey: vars[p.secret_key_env!] ?? "",
      });
    }
    case "s3": {
      const keyed = p.access_key_env !== undefined;
      return new S3Store({
        kind: "s3",
        bucket: p.bucket!,
        region: p.region ?? vars[AWS_REGION] ?? "us-east-1",
        endpoint: p.endpoint,
        accessKeyId: (keyed ? vars[p.access_key_env!] : vars[AWS_KEY]) ?? "",
        secretAccessKey: (keyed ? vars[p.secret_key_env!] : vars[AWS_SECRET]) ?? "",
        sessionToken: keyed ? undefined : vars[AWS_TOKEN],
      });
    }
    case "gcs":
      return new GcsStore({ bucket: p.bucket!, credential: vars[GCS_VARS[0]], emulator: vars[GCS_VARS[1]] });
  }
}
