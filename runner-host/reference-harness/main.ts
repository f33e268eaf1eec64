/**
 * The reference harness: `node runner-host/reference-harness/dist/main.mjs`, built from this file
 * by scripts/build-harness.ts (`node runner-host/reference-harness/main.ts` runs the sources).
 * Speaks `svc-harness/1` (../harness/protocol.ts) on stdio; the command loop is ./serve.ts.
 *
 * The stdout guard is installed by a static import and everything else is loaded after it by a
 * dynamic one: in the built file, modules shared with lazily loaded provider clients live in
 * separate chunks, and a chunk imported statically here would run before the guard.
 */
import "./stdout-guard.ts";

await import("./serve.ts");
