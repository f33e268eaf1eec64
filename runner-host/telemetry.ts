/**
 * OpenTelemetry of the runner-host (docs/design-notes.md "Telemetry"). The runner-host is the one
 * long-lived Node process, so the traces and most metrics are recorded here.
 *
 * Exports only when `OTEL_EXPORTER_OTLP_ENDPOINT` is set in the runner-host's environment: spans in
 * batches and metrics every 15 s, over OTLP/HTTP, under resource `service.name=svc`. Without it
 * every call is a cheap no-op and a turn's `traceparent` reaches tools unchanged.
 * Invariants: metrics carry no tenant or session attribute (only `harness`, `tool`, `outcome`);
 * `flush` and `shutdown` never throw and are bounded in time, so a dead collector cannot hold up
 * a drain. One exporting instance per process: `initTelemetry` makes it what `telemetry()` returns.
 */
import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  ValueType,
  type Context,
  type Counter,
  type Histogram,
  type Span,
  type Tracer,
  type UpDownCounter,
} from "@opentelemetry/api";
import { loggingErrorHandler, parseKeyPairsIntoRecord, setGlobalErrorHandler, W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { EXPORT_INTERVAL_MS, EXPORT_TIMEOUT_MS, MS_BUCKETS } from "../src/shared/metric-catalog.ts";
import type { Logger } from "./log.ts";

/** Bound on `flush`/`shutdown`, ms: a little over one export, so a failing export reports its error. */
export const FLUSH_TIMEOUT_MS = EXPORT_TIMEOUT_MS + 1_000;

export type ToolOutcome = "success" | "tool_error";

/** Where a span sits: its OTel context, and the `traceparent` an outbound request carries from it. */
export type TraceContext = { readonly otel: Context; readonly traceparent: string | undefined };

/** A turn's `session.execute` span; it also counts in `svc.executions.active` until `end`. */
export type TurnSpan = { readonly context: TraceContext; end(status: string, errorCode?: string): void };
/** A host tool call's `tool.call` span. */
export type ToolSpan = { readonly context: TraceContext; end(outcome: ToolOutcome): void };

export type TurnSpanOptions = { sessionId: string; harness: string; traceparent?: string };

export interface Telemetry {
  readonly enabled: boolean;
  /** Starts `session.execute`, a child of `traceparent` when that is well-formed. */
  startTurnSpan(o: TurnSpanOptions): TurnSpan;
  /** Starts `tool.call` under the turn's span. */
  startToolSpan(parent: TraceContext, tool: string): ToolSpan;
  /** `svc.input.queue_delay`: acceptance to turn start, ms. */
  queueDelay(ms: number): void;
  /** `svc.assistant.first_output`: acceptance to first assistant output, ms. */
  firstOutput(ms: number): void;
  /** `svc.runner.startup`: harness process spawn to `ready`, ms. */
  runnerStartup(harness: string, ms: number): void;
  /** `svc.tool.calls` and `svc.tool.duration`. */
  toolCall(tool: string, outcome: ToolOutcome, ms: number): void;
  /** `svc.native.appended_bytes`: the JSON size of native records a harness appended. */
  nativeAppended(bytes: number): void;
  /** Exports what is pending now. Never throws. */
  flush(): Promise<void>;
  /** Exports what is pending and stops. Never throws. */
  shutdown(): Promise<void>;
}

/** The W3C `traceparent` for a request made on behalf of `ctx` (undefined: send none). */
export function traceparentOf(ctx: TraceContext): string | undefined {
  return ctx.traceparent;
}

class NoopTelemetry implements Telemetry {
  readonly enabled = false;
  startTurnSpan(o: TurnSpanOptions): TurnSpan {
    return { context: { otel: ROOT_CONTEXT, traceparent: o.traceparent }, end() {} };
  }
  startToolSpan(parent: TraceContext): ToolSpan {
    return { context: parent, end() {} };
  }
  queueDelay(): void {}
  firstOutput(): void {}
  runnerStartup(): void {}
  toolCall(): void {}
  nativeAppended(): void {}
  async flush(): Promise<void> {}
  async shutdown(): Promise<void> {}
}

const NOOP: Telemetry = new NoopTelemetry();
let current: Telemetry = NOOP;

/** The process's telemetry: the exporting instance while one is initialised, else the no-op. */
export function telemetry(): Telemetry {
  return current;
}

/**
 * Reads `OTEL_EXPORTER_OTLP_ENDPOINT` (and `OTEL_EXPORTER_OTLP_HEADERS`) from `env`, the
 * runner-host's environment. Set: an exporting instance, which becomes `telemetry()` until its
 * `shutdown`. Unset or empty: the no-op, and nothing changes.
 */
export function initTelemetry(env: Record<string, string | undefined>, log: Logger): Telemetry {
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!endpoint) return NOOP;
  let origin: string;
  try {
    origin = new URL(endpoint).origin; // the exporters would throw on it too
  } catch {
    log("error", "OTEL_EXPORTER_OTLP_ENDPOINT is not a URL; nothing is exported");
    return NOOP;
  }
  const t = new OtlpTelemetry(endpoint, parseKeyPairsIntoRecord(env.OTEL_EXPORTER_OTLP_HEADERS), log);
  current = t;
  log("info", "exporting traces and metrics over OTLP/HTTP", { endpoint: origin });
  return t;
}

const propagator = new W3CTraceContextPropagator();

/** The context's span as a `traceparent` header value. */
function inject(otel: Context): string | undefined {
  const carrier: Record<string, string> = {};
  propagator.inject(otel, carrier, defaultTextMapSetter);
  return carrier.traceparent;
}

class OtlpTelemetry implements Telemetry {
  readonly enabled = true;
  readonly #log: Logger;
  readonly #traces: TracerProvider;
  readonly #metrics: MeterProvider;
  readonly #tracer: Tracer;
  readonly #active: UpDownCounter;
  readonly #queueDelay: Histogram;
  readonly #firstOutput: Histogram;
  readonly #startup: Histogram;
  readonly #toolCalls: Counter;
  readonly #toolDuration: Histogram;
  readonly #nativeBytes: Counter;
  #stopped: Promise<void> | undefined;

  constructor(endpoint: string, headers: Record<string, string>, log: Logger) {
    this.#log = log;
    // The generic endpoint gets the per-signal path appended (OTLP exporter spec).
    const base = endpoint.replace(/\/+$/, "");
    const resource = resourceFromAttributes({ "service.name": "svc" });
    const exporterOptions = { headers, timeoutMillis: EXPORT_TIMEOUT_MS };
    this.#traces = new TracerProvider({
      resource,
      spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ ...exporterOptions, url: `${base}/v1/traces` }) })],
    });
    const reader = new PeriodicExportingMetricReader({
      exporter: new OTLPMetricExporter({ ...exporterOptions, url: `${base}/v1/metrics` }),
      exportIntervalMillis: EXPORT_INTERVAL_MS,
      exportTimeoutMillis: EXPORT_TIMEOUT_MS,
    });
    this.#metrics = new MeterProvider({ resource, readers: [reader] });
    this.#tracer = this.#traces.getTracer("svc");
    const meter = this.#metrics.getMeter("svc");
    const ms = (name: string, description: string) =>
      meter.createHistogram(name, { unit: "ms", description, advice: { explicitBucketBoundaries: MS_BUCKETS } });
    this.#active = meter.createUpDownCounter("svc.executions.active", { unit: "{turn}", description: "Running turns", valueType: ValueType.INT });
    this.#queueDelay = ms("svc.input.queue_delay", "Time a message waited before its turn began");
    this.#firstOutput = ms("svc.assistant.first_output", "Time from message acceptance to first assistant output");
    this.#startup = ms("svc.runner.startup", "Harness process start time, by harness");
    this.#toolCalls = meter.createCounter("svc.tool.calls", { unit: "{call}", description: "Tool calls, by tool and outcome", valueType: ValueType.INT });
    this.#toolDuration = ms("svc.tool.duration", "Tool call latency, by tool and outcome");
    this.#nativeBytes = meter.createCounter("svc.native.appended_bytes", { unit: "By", description: "Growth of native harness state", valueType: ValueType.INT });
    // Failed periodic exports surface here (an unreachable collector): log them, never throw.
    setGlobalErrorHandler((err) => log("warn", "telemetry export failed", { error: String((err as Error)?.message ?? err) }));
  }

  startTurnSpan(o: TurnSpanOptions): TurnSpan {
    const parent = o.traceparent ? propagator.extract(ROOT_CONTEXT, { traceparent: o.traceparent }, defaultTextMapGetter) : ROOT_CONTEXT;
    const span = this.#tracer.startSpan("session.execute", { attributes: { "session.id": o.sessionId, "harness.name": o.harness } }, parent);
    this.#active.add(1);
    let ended = false;
    return {
      context: this.#contextOf(parent, span),
      end: (status, errorCode) => {
        if (ended) return;
        ended = true;
        this.#active.add(-1);
        span.setAttribute("turn.status", status);
        if (errorCode) span.setAttribute("error.type", errorCode);
        if (status === "failed") span.setStatus({ code: SpanStatusCode.ERROR, message: errorCode });
        span.end();
      },
    };
  }

  startToolSpan(parent: TraceContext, tool: string): ToolSpan {
    const span = this.#tracer.startSpan("tool.call", { kind: SpanKind.CLIENT, attributes: { "tool.name": tool } }, parent.otel);
    return {
      context: this.#contextOf(parent.otel, span),
      end: (outcome) => {
        span.setAttribute("tool.outcome", outcome);
        if (outcome === "tool_error") span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      },
    };
  }

  #contextOf(parent: Context, span: Span): TraceContext {
    const otel = trace.setSpan(parent, span);
    return { otel, traceparent: inject(otel) };
  }

  queueDelay(ms: number): void {
    this.#queueDelay.record(Math.max(0, ms));
  }
  firstOutput(ms: number): void {
    this.#firstOutput.record(Math.max(0, ms));
  }
  runnerStartup(harness: string, ms: number): void {
    this.#startup.record(ms, { harness });
  }
  toolCall(tool: string, outcome: ToolOutcome, ms: number): void {
    this.#toolCalls.add(1, { tool, outcome });
    this.#toolDuration.record(ms, { tool, outcome });
  }
  nativeAppended(bytes: number): void {
    this.#nativeBytes.add(bytes);
  }

  flush(): Promise<void> {
    return this.#bounded("flush", [this.#traces.forceFlush(), this.#metrics.forceFlush()]);
  }

  shutdown(): Promise<void> {
    this.#stopped ??= this.#bounded("shutdown", [this.#traces.shutdown(), this.#metrics.shutdown()]).finally(() => {
      if (current === this) {
        current = NOOP;
        setGlobalErrorHandler(loggingErrorHandler());
      }
    });
    return this.#stopped;
  }

  /** Waits for the exports, at most `FLUSH_TIMEOUT_MS`; logs what failed instead of throwing. */
  async #bounded(what: string, work: Promise<void>[]): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), FLUSH_TIMEOUT_MS)));
    const outcome = await Promise.race([Promise.allSettled(work), late]);
    clearTimeout(timer);
    if (outcome === "late") return this.#log("warn", `telemetry ${what} timed out`, { timeout_ms: FLUSH_TIMEOUT_MS });
    for (const r of outcome) {
      if (r.status === "rejected") this.#log("warn", `telemetry ${what} failed`, { error: String((r.reason as Error)?.message ?? r.reason) });
    }
  }
}
