import type { EventEmitter } from "node:events";
import {
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { isDomainError } from "./errors.js";

/**
 * The one way code makes spans (docs/operations.md "Traces"; docs/decisions.md "Tracing"): a thin
 * layer over `@opentelemetry/api`, so the domain names what it does and never touches the API.
 * Off (the default, no OTEL_EXPORTER_OTLP_ENDPOINT), every function here is one check of a module
 * variable and then the plain call: no span objects, no context switch, no attribute built (pass
 * attributes as a function where computing them costs anything). The tracing adapter
 * (adapters/tracing.ts) turns it on once its SDK is registered.
 *
 * Attribute values are never a secret, an API key, a supplier key, wallet private data or prompt
 * text: ids, model names, prices, costs, token counts, codes, statuses. Errors are recorded by their
 * code (`error.type`), never by their message.
 */

/** Attributes of a span (an array: a list of strings, e.g. finish reasons); undefined values are left out. */
export type SpanAttrs = Record<string, string | number | boolean | readonly string[] | undefined>;

/** A span's attributes, or a function computing them (called only when tracing is on). */
export type LazyAttrs = SpanAttrs | (() => SpanAttrs);

export type SpanRole = "internal" | "server" | "client" | "consumer" | "producer";

/** A span in progress, as the code that owns it sees it. */
export interface TraceSpan {
  /** adds attributes (undefined values are left out) */
  set(attrs: SpanAttrs): void;
  rename(name: string): void;
  /** the operation failed: `error.type` (a code, never a message) and status ERROR */
  fail(type: string): void;
  /** ends the span (a second call does nothing) */
  end(): void;
  /** runs `fn` with this span active: spans started and calls made inside are its children */
  run<T>(fn: () => T): T;
  /** makes `emitter`'s listeners run with this span active (a request's body events, its `close`) */
  bind<E extends EventEmitter>(emitter: E): E;
}

const NOOP_SPAN: TraceSpan = Object.freeze({
  set: () => undefined,
  rename: () => undefined,
  fail: () => undefined,
  end: () => undefined,
  run: <T>(fn: () => T): T => fn(),
  bind: <E extends EventEmitter>(emitter: E): E => emitter,
});

const KINDS: Record<SpanRole, SpanKind> = {
  internal: SpanKind.INTERNAL,
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  consumer: SpanKind.CONSUMER,
  producer: SpanKind.PRODUCER,
};

/** The W3C trace context a job or a request carries (`traceparent`, `tracestate`). */
export type TraceCarrier = Record<string, string>;

let tracer: Tracer | undefined;

/** Turns spans on with `t` (the tracing adapter, once its SDK is registered), or off (undefined). */
export function useTracer(t: Tracer | undefined): void {
  tracer = t;
}

/** Whether spans are being made (an SDK is registered). */
export function tracingOn(): boolean {
  return tracer !== undefined;
}

function clean(attrs: SpanAttrs): Record<string, string | number | boolean | string[]> {
  const out: Record<string, string | number | boolean | string[]> = {};
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined) out[k] = typeof v === "object" ? [...v] : v;
  return out;
}

/** The `error.type` of a thrown value: a DomainError's code, else the error's class name. */
export function errorTypeOf(e: unknown): string {
  if (isDomainError(e)) return e.code;
  return e instanceof Error ? e.name : "unknown";
}

class ActiveSpan implements TraceSpan {
  private ended = false;
  private readonly ctx: Context;

  constructor(
    private readonly span: Span,
    parent: Context,
  ) {
    this.ctx = trace.setSpan(parent, span);
  }

  set(attrs: SpanAttrs): void {
    this.span.setAttributes(clean(attrs));
  }

  rename(name: string): void {
    this.span.updateName(name);
  }

  fail(type: string): void {
    this.span.setAttribute("error.type", type);
    this.span.setStatus({ code: SpanStatusCode.ERROR });
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.span.end();
  }

  run<T>(fn: () => T): T {
    return context.with(this.ctx, fn);
  }

  bind<E extends EventEmitter>(emitter: E): E {
    return context.bind(this.ctx, emitter);
  }
}

/**
 * Starts a span (end it yourself; `run` makes it the active one). Its parent is the active span,
 * or, with `from`, the trace context a caller sent (request headers, a job's carrier): a remote
 * parent, the trace it continues. Off: a span that does nothing.
 */
export function startSpan(
  name: string,
  attrs?: LazyAttrs,
  opts: { kind?: SpanRole; from?: Readonly<Record<string, unknown>> | undefined } = {},
): TraceSpan {
  const t = tracer;
  if (!t) return NOOP_SPAN;
  const parent = opts.from ? propagation.extract(ROOT_CONTEXT, opts.from) : context.active();
  const attributes = attrs === undefined ? undefined : clean(typeof attrs === "function" ? attrs() : attrs);
  const span = t.startSpan(name, { kind: KINDS[opts.kind ?? "internal"], attributes }, parent);
  return new ActiveSpan(span, parent);
}

/**
 * Runs `fn` in a span of its own, active for everything `fn` awaits. A throw marks the span failed
 * (`error.type`: the DomainError's code; with the request's support reference when the error
 * carries one) and goes on. Off: `fn` with a span that does nothing.
 */
export function withSpan<T>(
  name: string,
  attrs: LazyAttrs | undefined,
  fn: (span: TraceSpan) => Promise<T>,
  opts: { kind?: SpanRole; from?: Readonly<Record<string, unknown>> | undefined } = {},
): Promise<T> {
  // off: `fn`'s own promise, not one more around it
  if (!tracer) return fn(NOOP_SPAN);
  return inSpan(startSpan(name, attrs, opts), fn);
}

async function inSpan<T>(span: TraceSpan, fn: (span: TraceSpan) => Promise<T>): Promise<T> {
  try {
    return await span.run(() => fn(span));
  } catch (e) {
    span.fail(errorTypeOf(e));
    if (isDomainError(e) && typeof e.details.supportReference === "string") {
      span.set({ "svc.support_reference": e.details.supportReference });
    }
    throw e;
  } finally {
    span.end();
  }
}

/**
 * Writes the active trace context into `carrier` (W3C `traceparent`, `tracestate`): outgoing
 * headers, so the callee continues this trace. Off, or with no active span: nothing.
 */
export function injectTrace(carrier: Record<string, string>): void {
  if (!tracer) return;
  propagation.inject(context.active(), carrier);
}

/** The active trace context as a carrier for a job (undefined when off or with no active span). */
export function traceCarrier(): TraceCarrier | undefined {
  if (!tracer) return undefined;
  const carrier: TraceCarrier = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent ? carrier : undefined;
}
