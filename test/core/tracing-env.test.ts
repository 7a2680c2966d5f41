/**
 * When traces are exported (the standard OTEL_* environment) and how a client's `traceparent` is
 * read: anything malformed starts a new trace rather than joining a wrong one.
 */
import { describe, expect, it } from 'vitest';
import { formatTraceparent, parseTraceparent, tracingOn } from '../../src/tracing.js';
import { startTracing, tracesEndpoint } from '../../src/tracing-sdk.js';

const ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';

describe('tracing configuration', () => {
  it('is off without an endpoint, and when disabled', async () => {
    expect(tracesEndpoint({})).toBeNull();
    expect(tracesEndpoint({ OTEL_SERVICE_NAME: 'x' })).toBeNull();
    expect(
      tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }),
    ).toBeNull();
    expect(
      tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }),
    ).toBeNull();
    // Nothing started, nothing loaded: every span helper returns at its first check.
    expect(await startTracing({})).toBeNull();
    expect(tracingOn()).toBe(false);
  });

  it('reads the traces endpoint, or the base endpoint plus /v1/traces', () => {
    expect(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' })).toBe('http://c:4318/v1/traces');
    expect(
      tracesEndpoint({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:4318/custom',
      }),
    ).toBe('http://t:4318/custom');
    expect(
      tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'otlp' }),
    ).toBe('http://c:4318/v1/traces');
  });
});

describe('traceparent', () => {
  it('reads a valid header and writes it back', () => {
    const sc = parseTraceparent(`00-${ID}-${SPAN}-01`);
    expect(sc).toEqual({ traceId: ID, spanId: SPAN, traceFlags: 1, isRemote: true });
    expect(formatTraceparent(sc!)).toBe(`00-${ID}-${SPAN}-01`);
    expect(parseTraceparent(`00-${ID}-${SPAN}-00`)?.traceFlags).toBe(0);
    // A later version may carry more fields after the flags.
    expect(parseTraceparent(`01-${ID}-${SPAN}-01-extra`)?.traceId).toBe(ID);
  });

  it.each([
    ['absent', undefined],
    ['empty', ''],
    ['version ff', `ff-${ID}-${SPAN}-01`],
    ['zero trace id', `00-${'0'.repeat(32)}-${SPAN}-01`],
    ['zero span id', `00-${ID}-${'0'.repeat(16)}-01`],
    ['upper case', `00-${ID.toUpperCase()}-${SPAN}-01`],
    ['short trace id', `00-${ID.slice(1)}-${SPAN}-01`],
    ['version 00 with more fields', `00-${ID}-${SPAN}-01-extra`],
    ['garbage', 'not a traceparent'],
  ])('ignores a malformed header (%s)', (_name, header) => {
    expect(parseTraceparent(header)).toBeNull();
  });
});
