import { context, DiagLogLevel, diag, propagation, trace } from "@opentelemetry/api";
import type { Config } from "../config.js";
import { logger } from "../lib/logger.js";
import { useTracer } from "../lib/tracing.js";

/**
 * OpenTelemetry's SDK, started and stopped here only (docs/decisions.md "Tracing"). With no endpoint
 * configured nothing is loaded: `@opentelemetry/sdk-node` and the exporter are imported dynamically,
 * only when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, so a process
 * without tracing never parses them and `lib/tracing.ts` stays a no-op. Instrumentation is manual
 * (`lib/tracing.ts`; no auto-instrumentation, no loader hook): the SDK only exports what the code
 * makes. Spans go over OTLP/HTTP (JSON) in batches; the other standard variables (OTEL_TRACES_SAMPLER,
 * OTEL_EXPORTER_OTLP_HEADERS, OTEL_BSP_*, OTEL_RESOURCE_ATTRIBUTES, OTEL_PROPAGATORS) are read by the
 * SDK itself. Metrics stay Prometheus (`GET /metrics`) and logs pino: no OTel meter or logger runs.
 */

/** Tracer name (the instrumentation scope of every span). */
export const TRACER_NAME = "svc-inference-market";

/**
 * How long one export may take, its retries included (the exporter's `timeoutMillis`, in place of
 * OTEL_EXPORTER_OTLP_TIMEOUT's 10 s): a collector is expected beside the service, and a batch it
 * cannot take in this long is dropped with a warning rather than holding the service's shutdown.
 */
export const EXPORT_TIMEOUT_MS = 1_500;

/**
 * The most `shutdown` waits for the last spans to leave, so that a stop is never held up by tracing: an unreachable or silent
 * collector costs a stop at most this long; what has not left by then is lost.
 */
export const SHUTDOWN_DEADLINE_MS = 2_000;

/** Resolves after `ms` without holding the process open. */
function deadline(ms: number): Promise<"deadline"> {
  return new Promise((r) => setTimeout(() => r("deadline"), ms).unref());
}

export interface Tracing {
  readonly enabled: boolean;
  /** exports every span ended so far (tests, and before a planned stop) */
  flush(): Promise<void>;
  /** exports what is left and unregisters the SDK (runtime.close); resolves within SHUTDOWN_DEADLINE_MS */
  shutdown(): Promise<void>;
}

const OFF: Tracing = Object.freeze({
  enabled: false,
  flush: async () => undefined,
  shutdown: async () => undefined,
});

/** The SDK's own complaints (an export that failed, a full queue) as warnings in our logs. */
const diagToLog = {
  error: (message: string) => logger.warn({ component: "otel" }, message),
  warn: (message: string) => logger.warn({ component: "otel" }, message),
  info: () => undefined,
  debug: () => undefined,
  verbose: () => undefined,
};

let running = false;

/**
 * Starts tracing when `config.tracesUrl` is set; otherwise does nothing and loads nothing. One SDK
 * per process (the API's globals): a second start while one runs is refused.
 */
export async function startTracing(config: Config["tracing"]): Promise<Tracing> {
  const url = config.tracesUrl;
  if (url === undefined) return OFF;
  if (running) throw new Error("OTEL_EXPORTER_OTLP_ENDPOINT: tracing is already running in this process");
  running = true;
  try {
    const [{ NodeSDK }, { OTLPTraceExporter }] = await Promise.all([
      import("@opentelemetry/sdk-node"),
      import("@opentelemetry/exporter-trace-otlp-http"),
    ]);
    diag.setLogger(diagToLog, DiagLogLevel.WARN);
    const sdk = new NodeSDK({
      serviceName: config.serviceName,
      traceExporter: new OTLPTraceExporter({ url, timeoutMillis: EXPORT_TIMEOUT_MS }),
      instrumentations: [],
      // traces only: metrics are Prometheus', logs pino's
      metricReaders: [],
      logRecordProcessors: [],
    });
    sdk.start();
    useTracer(trace.getTracer(TRACER_NAME));
    const provider = trace.getTracerProvider() as { getDelegate?: () => { forceFlush?: () => Promise<void> } };
    let stopped = false;
    return {
      enabled: true,
      flush: async () => {
        await provider.getDelegate?.().forceFlush?.();
      },
      async shutdown() {
        if (stopped) return;
        stopped = true;
        useTracer(undefined);
        // the exporter gives up after EXPORT_TIMEOUT_MS; the deadline bounds the whole stop regardless
        const ended = await Promise.race([
          sdk.shutdown().catch((err: unknown) => logger.warn({ err }, "tracing did not shut down cleanly")),
          deadline(SHUTDOWN_DEADLINE_MS),
        ]);
        if (ended === "deadline") {
          logger.warn({ deadlineMs: SHUTDOWN_DEADLINE_MS }, "tracing: the last spans were not exported in time");
        }
        // the API's globals go back to no-ops, so a later start in this process registers again
        trace.disable();
        context.disable();
        propagation.disable();
        diag.disable();
        running = false;
      },
    };
  } catch (e) {
    running = false;
    throw e;
  }
}
