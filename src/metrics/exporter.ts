/**
 * Exports the isolate's metrics over OTLP/HTTP every 15 s while `OTEL_EXPORTER_OTLP_ENDPOINT` is
 * set (a Worker variable; without it nothing is kept or sent).
 *
 * A Worker isolate has no process of its own to run a timer in, and an object should not be woken
 * to report. So the flush rides on work the isolate is doing anyway: the first value recorded in a
 * window arms one timer for the end of that window (15 s after the previous export), and the request
 * or object that armed it keeps it alive with `waitUntil`. When it fires it takes everything the
 * isolate recorded since the last export, from any request or object, and posts it. An isolate
 * that records nothing sends nothing; one evicted before its timer fires loses that window.
 */
import { log } from "../log.ts";
import { newId } from "../shared/ids.ts";
import { EXPORT_INTERVAL_MS, EXPORT_TIMEOUT_MS } from "../shared/metric-catalog.ts";
import { exportRequest } from "./otlp.ts";
import { registry } from "./registry.ts";


export type ExportEnv = Record<string, unknown>;
/** What keeps the timer's work alive: `ctx.waitUntil` of the request or object. */
export type KeepAlive = (p: Promise<unknown>) => void;

// Both set on first use: a Worker's global scope may not draw random values, and its clock reads 0.
let instanceId: string | undefined;
let armed = false;
let lastExport: number | undefined;

function endpointOf(env: ExportEnv): string | undefined {
  const e = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  return typeof e === "string" && e.trim() ? e.trim().replace(/\/+$/, "") : undefined;
}

/** `OTEL_EXPORTER_OTLP_HEADERS`: `k=v,k2=v2`, values URL-encoded (OTLP exporter spec). */
function headersOf(env: ExportEnv): Record<string, string> {
  const raw = typeof env.OTEL_EXPORTER_OTLP_HEADERS === "string" ? env.OTEL_EXPORTER_OTLP_HEADERS : "";
  const out: Record<string, string> = {};
  for (const pair of raw.split(",")) {
    const at = pair.indexOf("=");
    if (at > 0) out[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
  }
  return out;
}

/**
 * Call after recording, with the current request's or object's `waitUntil`. Arms the window's
 * export if none is armed; without an endpoint it drops what was recorded.
 */
export function scheduleExport(env: ExportEnv, keepAlive: KeepAlive): void {
  const endpoint = endpointOf(env);
  if (!endpoint) {
    if (!registry.empty) registry.clear();
    return;
  }
  if (armed || registry.empty) return;
  armed = true;
  lastExport ??= Date.now();
  const delay = Math.max(0, lastExport + EXPORT_INTERVAL_MS - Date.now());
  keepAlive(
    new Promise<void>((resolve) => setTimeout(resolve, delay)).then(async () => {
      armed = false;
      lastExport = Date.now();
      await send(endpoint, headersOf(env));
    }),
  );
}

async function send(endpoint: string, headers: Record<string, string>): Promise<void> {
  const w = registry.take();
  if (w.metrics.size === 0) return;
  try {
    const res = await fetch(`${endpoint}/v1/metrics`, {
      method: "POST",
      headers: { ...headers, "Content-Type": "application/json" },
      body: JSON.stringify(exportRequest(w, (instanceId ??= newId()))),
      signal: AbortSignal.timeout(EXPORT_TIMEOUT_MS),
    });
    await res.body?.cancel();
    if (!res.ok) log("warn", "metrics export failed", { status: res.status });
  } catch (e) {
    // The window is dropped, not retried: the next one carries on from here.
    log("warn", "metrics export failed", { error: e instanceof Error ? e.name : "error" });
  }
}
