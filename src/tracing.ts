/**
 * OpenTelemetry traces of a submission's path (docs/operations.md "Traces"): the client's
 * `traceparent` → admission → queue wait → hand-off → the capsule's `message/stream` → the task's
 * first frame in the log → its delivery per surface, with the store round trips of the append path.
 * Off unless an OTLP endpoint is configured (tracing-sdk.ts starts the SDK): every helper here then
 * returns at its first check, and no SDK module is loaded. Only `@opentelemetry/api` is imported.
 */
import {
  context,
  ROOT_CONTEXT,
  SpanKind,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Span,
  type SpanContext,
} from '@opentelemetry/api';

let enabled = false;

/** Set by tracing-sdk.ts once a tracer provider exports spans (and back when it stops). */
export const setTracing = (on: boolean): void => {
  enabled = on;
};

/** Whether spans are made at all: every call site checks this first (zero cost when off). */
export const tracingOn = (): boolean => enabled;

const tracer = () => trace.getTracer('murmur-gateway');

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?$/;

/**
 * A W3C `traceparent` (trace-context level 1): version `ff` is invalid, as are all-zero ids, and a
 * version 00 header carries nothing after the flags. Null for anything else (the span starts a new
 * trace, as the spec asks of a receiver that cannot parse the header).
 */
export const parseTraceparent = (header: string | null | undefined): SpanContext | null => {
  if (!header) return null;
  const m = TRACEPARENT.exec(header.trim());
  if (!m) return null;
  const [, version, traceId, spanId, flags] = m as unknown as [string, string, string, string, string];
  if (version === 'ff' || (version === '00' && header.trim().length !== 55)) return null;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return null;
  return { traceId, spanId, traceFlags: parseInt(flags, 16) & TraceFlags.SAMPLED, isRemote: true };
};

export const formatTraceparent = (sc: SpanContext): string =>
  `00-${sc.traceId}-${sc.spanId}-0${(sc.traceFlags & TraceFlags.SAMPLED).toString(16)}`;

/** The context a `traceparent` (from a client, or kept in the log) continues; none: a new trace. */
export const contextOf = (traceparent: string | null | undefined): Context => {
  const sc = parseTraceparent(traceparent);
  return sc ? trace.setSpanContext(ROOT_CONTEXT, sc) : ROOT_CONTEXT;
};

/** The `traceparent` of a span, for the log or a request upstream (null: not recording). */
export const traceparentOf = (span: Span | undefined): string | null =>
  span?.isRecording() ? formatTraceparent(span.spanContext()) : null;

export interface SpanOptions {
  parent?: Context;
  attributes?: Attributes;
  kind?: SpanKind;
  /** ms since the epoch (a span that began before it was made: a queue wait). */
  startTime?: number;
}

/** A span, or undefined when tracing is off. */
export const startSpan = (name: string, options: SpanOptions = {}): Span | undefined => {
  if (!enabled) return undefined;
  return tracer().startSpan(
    name,
    {
      kind: options.kind ?? SpanKind.INTERNAL,
      ...(options.attributes ? { attributes: options.attributes } : {}),
      ...(options.startTime !== undefined ? { startTime: options.startTime } : {}),
    },
    options.parent ?? context.active(),
  );
};

/** Run `fn` with `span` as the active span (its children, the writer's store spans, find it). */
export const withSpan = <T>(span: Span | undefined, fn: () => T): T =>
  span ? context.with(trace.setSpan(context.active(), span), fn) : fn();

/**
 * The active context when tracing and inside a span (the writer keeps it with an entry, so the
 * store round trip joins that span), else undefined: an append outside any trace makes no span.
 */
export const activeContext = (): Context | undefined => {
  if (!enabled) return undefined;
  const active = context.active();
  return trace.getSpan(active) ? active : undefined;
};

/** End a span with an error status when `err` is given. */
export const endSpan = (span: Span | undefined, err?: unknown, endTime?: number): void => {
  if (!span) return;
  if (err !== undefined) {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({ code: 2, message: err instanceof Error ? err.message : String(err) });
  }
  span.end(endTime);
};

export { SpanKind, trace, type Context, type Span };
