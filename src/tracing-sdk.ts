/**
 * Starts the OpenTelemetry SDK when the standard environment asks for traces: an OTLP/HTTP (JSON)
 * exporter to `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`
 * (headers from `OTEL_EXPORTER_OTLP_HEADERS`, service name from `OTEL_SERVICE_NAME`, default
 * `murmur-gateway`). `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keeps it off. Off, the
 * SDK modules are never loaded (dynamic imports) and tracing.ts's helpers return at their first check.
 */
import type { Logger } from 'pino';
import { setTracing } from './tracing.js';

export interface RunningTracing {
  /** Export what is buffered now (tests, and before exit). */
  flush(): Promise<void>;
  /** Export what is buffered and stop; spans are no longer made. */
  shutdown(): Promise<void>;
}

/** The traces endpoint the environment names, or null: tracing stays off. */
export const tracesEndpoint = (env: NodeJS.ProcessEnv): string | null => {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return null;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporter && !exporter.split(',').includes('otlp')) return null;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!base) return null;
  return `${base.replace(/\/+$/, '')}/v1/traces`;
};

/** Header pairs of `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`, values percent-decoded). */
const headersOf = (raw: string | undefined): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const pair of (raw ?? '').split(',')) {
    const i = pair.indexOf('=');
    if (i <= 0) continue;
    try {
      out[pair.slice(0, i).trim()] = decodeURIComponent(pair.slice(i + 1).trim());
    } catch {
      out[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
    }
  }
  return out;
};

export const startTracing = async (
  env: NodeJS.ProcessEnv = process.env,
  logger?: Logger,
): Promise<RunningTracing | null> => {
  const url = tracesEndpoint(env);
  if (!url) return null;
  const [
    { trace, context },
    sdk,
    { OTLPTraceExporter },
    { resourceFromAttributes },
    { AsyncLocalStorageContextManager },
  ] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/context-async-hooks'),
  ]);
  const exporter = new OTLPTraceExporter({
    url,
    headers: headersOf(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS ?? env.OTEL_EXPORTER_OTLP_HEADERS),
  });
  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME?.trim() || 'murmur-gateway' }),
    // A client's sampled flag is followed; a trace the gateway starts is sampled.
    sampler: new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() }),
    // Batched, off the request path: an exporter that is slow or away never delays a submission.
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter, scheduledDelayMillis: 1_000 })],
  });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  trace.setGlobalTracerProvider(provider);
  setTracing(true);
  logger?.info({ endpoint: url }, 'exporting OpenTelemetry traces');
  return {
    flush: () => provider.forceFlush(),
    shutdown: async () => {
      setTracing(false);
      await provider.shutdown().catch(() => undefined);
      trace.disable();
      context.disable();
    },
  };
};
