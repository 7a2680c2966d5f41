/**
 * `GET /murmur/{capsule}/records`: the long-poll's records over SSE. Over a real Hub and MemoryStore,
 * every answer is compared with the poll route's own answer for the same cursor: same record
 * objects, same gap objects, same error bodies.
 */
import { Hono } from 'hono';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createPollRoutes } from '../../../adapters/murmur/poll.js';
import { encodeRecordEvent } from '../../../adapters/murmur/records-codec.js';
import { createRecordsRoutes } from '../../../adapters/murmur/records.js';
import { configSchema } from '../../../src/config/schema.js';
import { adapterConfigOf } from '../../../src/gateway.js';
import { SseParser } from '../../../src/client/sse-source.js';
import { Hub } from '../../../src/hub/hub.js';
import { MemoryStore } from '../../../src/log/memory-store.js';
import type { LogEntry } from '../../../src/log/record.js';
import type { RetentionPolicy } from '../../../src/log/store.js';
import { frames } from '../../hub/helpers.js';
import { standInCore } from './stand-in-core.js';

const CAPSULE = 'cap-1';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface SseEvent {
  event: string;
  id: string | null;
  data: unknown;
}

const setup = async (retention?: RetentionPolicy) => {
  const store = new MemoryStore(retention);
  // A fresh log's offsets start at a time floor: `base` is the offset before its first record.
  const base = (await store.position(CAPSULE)).head;
  const hub = new Hub(store, { dissolveMs: 10 });
  const shutdown = new AbortController();
  const deps = {
    core: standInCore(hub, shutdown.signal, CAPSULE),
    config: adapterConfigOf(configSchema.parse({})),
    logger: pino({ level: 'silent' }),
  };
  const app = new Hono();
  app.route('/', createPollRoutes(deps));
  app.route('/', createRecordsRoutes(deps));
  const streams: ReadableStreamDefaultReader<Uint8Array>[] = [];
  cleanups.push(async () => {
    for (const r of streams) await r.cancel().catch(() => undefined);
    shutdown.abort();
    await hub.close();
    await store.close();
  });

  /** Open the stream and collect events until `until` says enough (then stop reading). */
  const stream = async (
    query: string,
    until: (events: SseEvent[]) => boolean,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; headers: Headers; events: SseEvent[] }> => {
    const res = await app.request(`/murmur/${CAPSULE}/records${query}`, { headers });
    const events: SseEvent[] = [];
    const parser = new SseParser((event, id, data) => events.push({ event, id, data: JSON.parse(data) }));
    const reader = res.body!.getReader();
    streams.push(reader);
    const decoder = new TextDecoder();
    while (!until(events)) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(decoder.decode(value, { stream: true }));
    }
    await reader.cancel();
    return { status: res.status, headers: res.headers, events };
  };
  const poll = async (query: string): Promise<Record<string, unknown>> =>
    (await (await app.request(`/murmur/${CAPSULE}/poll${query}`)).json()) as Record<string, unknown>;
  return { store, base, app, stream, poll, shutdown };
};

const lastRecordAt =
  (offset: number) =>
  (events: SseEvent[]): boolean =>
    events.some((e) => e.event === 'record' && (e.data as { offset: number }).offset >= offset);

const recordsOf = (events: SseEvent[]): unknown[] =>
  events.filter((e) => e.event === 'record').map((e) => e.data);

const T0 = Date.UTC(2025, 0, 2, 3, 4, 5, 678);
const MIXED: LogEntry[] = [
  { kind: 'frame', event: 'error', upstreamId: '7', data: '{"msg": bad}', receivedAt: T0 },
  { kind: 'frame', event: 'status', upstreamId: null, data: '{"state":"rejected"}', receivedAt: T0 },
  { kind: 'fact', fact: 'upstream-connected', ack: '{"session":"s"}', attempt: 2, receivedAt: T0 },
  { kind: 'fact', fact: 'frames-possibly-missing', reason: 'gap', firstAvailableId: '40', receivedAt: T0 },
  {
    kind: 'submission',
    protocol: 'beeos',
    owner: 'alice',
    contextId: 'ctx',
    messageId: 'm1',
    text: 'hi',
    meta: { taskId: 't' },
    receivedAt: T0,
  },
  { kind: 'fact', fact: 'capsule-closed', receivedAt: T0 },
  { kind: 'fact', fact: 'frames-possibly-missing', reason: 'store-unavailable', count: 3, receivedAt: T0 },
  { kind: 'frame', event: 'text', upstreamId: '8', data: '{"text":"after close"}', receivedAt: T0 },
];

describe('records stream', () => {
  it('carries every record the poll returns, the same JSON, ids = offsets, then live ones', async () => {
    const f = await setup();
    const { offsets } = await f.store.append(CAPSULE, MIXED);
    const polled = await f.poll('?after=0&limit=1000');
    const head = offsets[offsets.length - 1]!;
    const live = f.stream('?after=0', lastRecordAt(head + 2));
    await new Promise((r) => setTimeout(r, 50));
    const more = await f.store.append(CAPSULE, frames(1, 2));
    const { status, headers, events } = await live;
    expect(status).toBe(200);
    expect(headers.get('content-type')).toBe('text/event-stream');
    expect(headers.get('x-accel-buffering')).toBe('no');
    expect(events[0]).toEqual({ event: 'ready', id: null, data: { head, epoch: polled.epoch } });
    const after = await f.poll(`?after=${head}`);
    expect(recordsOf(events)).toEqual([...(polled.records as unknown[]), ...(after.records as unknown[])]);
    expect(more.offsets).toEqual([head + 1, head + 2]);
    for (const e of events.filter((x) => x.event === 'record'))
      expect(e.id).toBe(String((e.data as { offset: number }).offset));
    // Each loss fact is preceded by the gap the poll reports for it (capsule-closed ends nothing).
    const gaps = events.filter((e) => e.event === 'gap').map((e) => e.data);
    expect(gaps[0]).toEqual(polled.gap);
    expect(gaps[1]).toEqual((await f.poll(`?after=${f.base + 4}`)).gap);
    expect(gaps).toHaveLength(2);
    const firstGap = events.findIndex((e) => e.event === 'gap');
    expect((events[firstGap + 1]!.data as { offset: number }).offset).toBe(f.base + 4);
  });

  it('resumes after Last-Event-ID, which wins over ?after=', async () => {
    const f = await setup();
    await f.store.append(CAPSULE, frames(1, 10));
    const { events } = await f.stream('?after=0', lastRecordAt(f.base + 10), {
      'last-event-id': String(f.base + 7),
    });
    expect(recordsOf(events)).toEqual((await f.poll(`?after=${f.base + 7}`)).records);
    expect(events.filter((e) => e.event === 'gap')).toEqual([]);
  });

  it('says retention with the poll gap when the cursor is older than the log, then serves what is left', async () => {
    const f = await setup({ maxRecords: 10, maxAgeMs: 0 });
    await f.store.append(CAPSULE, frames(1, 30));
    const polled = await f.poll(`?after=${f.base + 5}`);
    const { events } = await f.stream(`?after=${f.base + 5}`, lastRecordAt(f.base + 30));
    expect(events.map((e) => e.event).slice(0, 3)).toEqual(['ready', 'gap', 'record']);
    expect(events[1]!.data).toEqual(polled.gap);
    expect(polled.gap).toEqual({ reason: 'retention', first_available: f.base + 21 });
    expect(recordsOf(events)).toEqual(polled.records);
  });

  it('tells a cursor beyond the head to start over, as the poll does, then serves from there', async () => {
    const f = await setup({ maxRecords: 10, maxAgeMs: 0 });
    await f.store.append(CAPSULE, frames(1, 30));
    const polled = await f.poll(`?after=${f.base + 31}`);
    const { events } = await f.stream(`?after=${f.base + 31}`, lastRecordAt(f.base + 30));
    expect(events[1]).toEqual({ event: 'gap', id: null, data: polled.gap });
    expect(polled.gap).toEqual({ reason: 'ahead', first_available: f.base + 21 });
    expect(recordsOf(events)).toEqual((await f.poll(`?after=${f.base + 20}`)).records);
  });

  it('encodes a record once, whoever reads it', async () => {
    const f = await setup();
    await f.store.append(CAPSULE, frames(1, 1));
    const store = f.store;
    const [record] = (await store.read(CAPSULE, 0, 1)).records;
    expect(encodeRecordEvent(record!)).toBe(encodeRecordEvent(record!));
  });

  it('ends the stream when the gateway drains', async () => {
    const f = await setup();
    await f.store.append(CAPSULE, frames(1, 2));
    const res = await f.app.request(`/murmur/${CAPSULE}/records`);
    f.shutdown.abort();
    // The response ends (text() resolves) instead of streaming on; the client resumes from its cursor.
    expect(await res.text()).toMatch(/^event: ready\n/);
  });
});

describe('bad input', () => {
  const bad = (message: string) => ({ error: { code: 'bad_request', message } });
  const AFTER = bad('after must be a non-negative integer');
  const LAST = bad('Last-Event-ID must be a non-negative integer');
  const cases: [string, Record<string, string>, unknown][] = [
    ['?after=-1', {}, AFTER],
    ['?after=abc', {}, AFTER],
    ['?after=1.5', {}, AFTER],
    ['?after=', {}, AFTER],
    ['?after=%201', {}, AFTER],
    ['?after=1e3', {}, AFTER],
    ['?after=99999999999999999999', {}, AFTER],
    ['?after=1&after=2', {}, bad('after must be given at most once')],
    ['', { 'last-event-id': 'abc' }, LAST],
    ['', { 'last-event-id': '-1' }, LAST],
    ['', { 'last-event-id': '1.5' }, LAST],
    ['', { 'last-event-id': '' }, LAST],
    ['', { 'last-event-id': '99999999999999999999' }, LAST],
    ['?after=x', { 'last-event-id': '5' }, AFTER], // the query is checked first
  ];
  it.each(cases)('%s %j → 400 naming the cursor', async (query, headers, expected) => {
    const f = await setup();
    const res = await f.app.request(`/murmur/${CAPSULE}/records${query}`, { headers });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual(expected);
  });

  it('ignores the poll-only and unknown parameters', async () => {
    const f = await setup();
    await f.store.append(CAPSULE, frames(1, 1));
    const { status, events } = await f.stream('?wait=abc&limit=0&x=1', lastRecordAt(f.base + 1));
    expect(status).toBe(200);
    expect(recordsOf(events)).toHaveLength(1);
  });

  it('answers an unknown capsule with 404 and other methods with 405', async () => {
    const f = await setup();
    for (const path of ['/murmur/nope/records', '/murmur/nope/records?after=x', '/murmur/bad%20id/records']) {
      const res = await f.app.request(path);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: { code: 'capsule_not_found', message: 'no such capsule' } });
    }
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const res = await f.app.request(`/murmur/${CAPSULE}/records`, { method, body: '{}' });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('GET, HEAD');
      expect(await res.json()).toEqual({ error: { code: 'method_not_allowed', message: 'use GET' } });
    }
  });
});
