/**
 * One trace per submission (docs/operations.md "Traces"): from the client's `traceparent` through the
 * request, the admission, its store round trips, the queue wait, the hand-off, the capsule's
 * `message/stream` (whose request carries the hand-off's `traceparent`), the task's first frame in
 * the log and its delivery per surface. The spans are exported by the real OTLP/HTTP (JSON) exporter
 * to a receiver on 127.0.0.1 in this file; the parent chain is checked span by span. Across two
 * replicas the admission and the hand-off run on different gateways: the log carries the trace.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createFlueClient } from '@flue/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../support/api-keys.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTracing, type RunningTracing } from '../../src/tracing-sdk.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { testRedisUrl } from '../support/redis.js';
import { startCrossReplica, until, type CrossReplicaRig } from '../fleet/cross-replica-rig.js';

const redisUrl = testRedisUrl();
const ALICE = `oag_${'d4'.repeat(32)}`;
const KEYS = { apiKeys: [{ sha256: hashApiKey(ALICE), owner: 'alice' }] };
const paced = (reply: string): string => `#sim ${JSON.stringify({ reply, delayMs: 30, turns: 2 })}`;

interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: Record<string, unknown>;
}

/** An OTLP/HTTP receiver (JSON encoding): every span of every export, in arrival order. */
const startReceiver = async () => {
  const spans: ReceivedSpan[] = [];
  const contentTypes = new Set<string>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      contentTypes.add(String(req.headers['content-type']));
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans: {
          scopeSpans: {
            spans: (Omit<ReceivedSpan, 'attributes'> & {
              attributes?: { key: string; value: Record<string, unknown> }[];
            })[];
          }[];
        }[];
      };
      for (const rs of body.resourceSpans)
        for (const ss of rs.scopeSpans)
          for (const s of ss.spans)
            spans.push({
              ...s,
              attributes: Object.fromEntries(
                (s.attributes ?? []).map((a) => [a.key, Object.values(a.value)[0]]),
              ),
            });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    contentTypes,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
};

/** An HTTP proxy in front of the capsule that remembers the `traceparent` of each POST it forwards. */
const startRecordingProxy = async (target: string) => {
  const traceparents: string[] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    if (req.method === 'POST' && typeof req.headers.traceparent === 'string')
      traceparents.push(req.headers.traceparent);
    const up = http.request(new URL(req.url ?? '/', target), { method: req.method, headers: req.headers });
    up.on('response', (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    traceparents,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
};

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');

/** The spans of one trace by name (each name once, unless `many`). */
const chainOf = (spans: ReceivedSpan[], traceId: string) => {
  const mine = spans.filter((s) => s.traceId === traceId);
  const one = (name: string): ReceivedSpan => {
    const found = mine.filter((s) => s.name === name);
    expect(
      found.map((s) => s.name),
      name,
    ).toEqual([name]);
    return found[0]!;
  };
  return { mine, one };
};

const NAMES = [
  'murmur.request',
  'murmur.submission.admit',
  'murmur.submission.queue_wait',
  'murmur.submission.handoff',
  'murmur.capsule.message_stream',
  'murmur.task.first_frame',
  'murmur.deliver',
];

/** Every expected span of the trace has arrived (the exporter batches: flushed, then polled). */
const arrived = async (tracing: RunningTracing, spans: ReceivedSpan[], traceId: string) =>
  until(async () => {
    await tracing.flush();
    const names = new Set(spans.filter((s) => s.traceId === traceId).map((s) => s.name));
    return NAMES.every((n) => names.has(n)) ? true : undefined;
  }, 15_000);

/** The parent chain every submission's trace has, whichever surface and replica. */
const checkChain = (spans: ReceivedSpan[], traceId: string, clientSpan: string, surface: string) => {
  const { mine, one } = chainOf(spans, traceId);
  const request = one('murmur.request');
  expect(request.parentSpanId).toBe(clientSpan);
  expect(request.attributes['murmur.surface']).toBe(surface);
  const admit = one('murmur.submission.admit');
  expect(admit.parentSpanId).toBe(request.spanId);
  const wait = one('murmur.submission.queue_wait');
  expect(wait.parentSpanId).toBe(admit.spanId);
  const handoff = one('murmur.submission.handoff');
  expect(handoff.parentSpanId).toBe(admit.spanId);
  expect(handoff.attributes['murmur.outcome']).toBe('accepted');
  const call = one('murmur.capsule.message_stream');
  expect(call.parentSpanId).toBe(handoff.spanId);
  const first = one('murmur.task.first_frame');
  expect(first.parentSpanId).toBe(admit.spanId);
  expect(first.attributes['murmur.task_id']).toBe(call.attributes['murmur.task_id']);
  const deliveries = mine.filter((s) => s.name === 'murmur.deliver');
  expect(deliveries.map((d) => d.attributes['murmur.surface'])).toContain(surface);
  for (const d of deliveries) expect(d.parentSpanId).toBe(handoff.spanId);
  // The store round trips of the admission and of the fenced hand-off fact.
  const appends = mine.filter((s) => s.name === 'murmur.store.append');
  expect(appends.some((a) => a.parentSpanId === admit.spanId)).toBe(true);
  expect(appends.some((a) => a.parentSpanId === handoff.spanId)).toBe(true);
  return { call };
};

describe('submission traces', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let tracing: RunningTracing;
  beforeAll(async () => {
    receiver = await startReceiver();
    tracing = (await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }))!;
    expect(tracing).not.toBeNull();
  });
  afterAll(async () => {
    await tracing?.shutdown();
    await receiver?.close();
  });

  describe('one gateway (embedded store)', () => {
    let sim: SimulatedCapsule;
    let proxy: Awaited<ReturnType<typeof startRecordingProxy>>;
    let gw: TestGateway;
    beforeAll(async () => {
      sim = await startSimulator({ heartbeatMs: 200 });
      proxy = await startRecordingProxy(sim.url);
      gw = await startTestGateway({ capsules: { cap: proxy.url }, config: KEYS });
    }, 30_000);
    afterAll(async () => {
      await gw?.close();
      await proxy?.close();
      await sim?.stop();
    });

    it('a Flue message: the chain from the client span to the delivery, and traceparent upstream', async () => {
      const traceId = hex(16);
      const clientSpan = hex(8);
      const res = await fetch(`${gw.baseUrl}/flue/cap/traced`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${ALICE}`,
          'content-type': 'application/json',
          traceparent: `00-${traceId}-${clientSpan}-01`,
        },
        body: JSON.stringify({ kind: 'user', body: paced('traced flue') }),
      });
      expect(res.status).toBe(202);
      const flue = createFlueClient({ url: `${gw.baseUrl}/flue/cap/traced`, token: ALICE });
      // The 202's receipt, as the SDK's own send() would return it.
      await flue.wait((await res.json()) as Parameters<typeof flue.wait>[0]);
      await arrived(tracing, receiver.spans, traceId);
      const { call } = checkChain(receiver.spans, traceId, clientSpan, 'flue');
      // The capsule was asked with the message_stream span as parent: it continues this trace.
      expect(proxy.traceparents).toContain(`00-${traceId}-${call.spanId}-01`);
      expect([...receiver.contentTypes]).toEqual(['application/json']);
    }, 30_000);

    it('a BeeOS task without a traceparent starts a trace of its own', async () => {
      const before = new Set(receiver.spans.map((s) => s.traceId));
      const res = await fetch(`${gw.baseUrl}/api/v1/agents/cap/tasks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' },
        body: JSON.stringify({ message: paced('untraced beeos') }),
      });
      expect(res.status).toBe(202);
      const task = ((await res.json()) as { data: { task_id: string } }).data.task_id;
      const events = await fetch(`${gw.baseUrl}/api/v1/agents/cap/tasks/${task}/events`, {
        headers: { authorization: `Bearer ${ALICE}` },
        signal: AbortSignal.timeout(15_000),
      });
      expect(await events.text()).toContain('untraced beeos');
      const traceId = await until(async () => {
        await tracing.flush();
        const admit = receiver.spans.find(
          (s) =>
            s.name === 'murmur.submission.admit' &&
            s.attributes['murmur.surface'] === 'beeos' &&
            !before.has(s.traceId),
        );
        return admit?.traceId;
      }, 15_000);
      await arrived(tracing, receiver.spans, traceId);
      const request = chainOf(receiver.spans, traceId).one('murmur.request');
      expect(request.parentSpanId ?? '').toBe('');
    }, 30_000);

    it('a malformed traceparent is ignored: the submission is admitted in a new trace', async () => {
      const res = await fetch(`${gw.baseUrl}/flue/cap/bad-trace`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${ALICE}`,
          'content-type': 'application/json',
          traceparent: `00-${'0'.repeat(32)}-${hex(8)}-01`,
        },
        body: JSON.stringify({ kind: 'user', body: 'bad trace' }),
      });
      expect(res.status).toBe(202);
      const flue = createFlueClient({ url: `${gw.baseUrl}/flue/cap/bad-trace`, token: ALICE });
      await flue.wait((await res.json()) as Parameters<typeof flue.wait>[0]);
      await tracing.flush();
      expect(receiver.spans.some((s) => s.traceId === '0'.repeat(32))).toBe(false);
      // Only a request starts a trace: the ingestor's appends, untraced, make no spans of their own.
      const roots = receiver.spans.filter((s) => !s.parentSpanId).map((s) => s.name);
      expect(new Set(roots)).toEqual(new Set(['murmur.request']));
    }, 30_000);
  });

  describe.skipIf(!redisUrl)('two replicas on one Redis', () => {
    let rig: CrossReplicaRig;
    beforeAll(async () => {
      rig = await startCrossReplica(redisUrl!, { config: KEYS });
    }, 30_000);
    afterAll(async () => rig?.close());

    it('a BeeOS conversation message admitted by the other replica: one trace through the log', async () => {
      const api = `${rig.other.baseUrl}/api/v1/agents/${rig.capsule}`;
      const headers = { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' };
      const conv = (await (
        await fetch(`${api}/conversations`, { method: 'POST', headers, body: '{}' })
      ).json()) as { data: { conversation_id: string } };
      const id = conv.data.conversation_id;
      // A live reader of the conversation on the admitting replica: its delivery joins the trace.
      const events = await fetch(`${api}/conversations/${id}/events`, {
        headers,
        signal: AbortSignal.timeout(20_000),
      });
      expect(events.status).toBe(200);
      const traceId = hex(16);
      const clientSpan = hex(8);
      const res = await fetch(`${api}/conversations/${id}/messages`, {
        method: 'POST',
        headers: { ...headers, traceparent: `00-${traceId}-${clientSpan}-01` },
        body: JSON.stringify({ message: paced('across replicas') }),
      });
      expect(res.status).toBe(202);
      await arrived(tracing, receiver.spans, traceId);
      checkChain(receiver.spans, traceId, clientSpan, 'beeos');
      await events.body?.cancel();
    }, 40_000);
  });
});
