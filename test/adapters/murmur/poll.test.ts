/** The long-poll route over a real Hub and MemoryStore: shapes, waits, gaps and every bad input. */
import { serve, type ServerType } from '@hono/node-server';
import type { Hono } from 'hono';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createPollRoutes } from '../../../adapters/murmur/poll.js';
import type { Hub } from '../../../src/hub/hub.js';
import type { LogEntry } from '../../../src/log/record.js';
import type { MemoryStore } from '../../../src/log/memory-store.js';
import type { RetentionPolicy } from '../../../src/log/store.js';
import { frames } from '../../hub/helpers.js';
import { standInRoutes } from './stand-in-core.js';

const CAPSULE = 'cap-1';
const T0 = Date.UTC(2025, 0, 2, 3, 4, 5, 678);
const T0_ISO = '2025-01-02T03:04:05.678Z';

interface Fixture {
  app: Hono;
  hub: Hub;
  store: MemoryStore;
  shutdown: AbortController;
  get(query: string): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }>;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A poll answer with every offset shifted down by `b` (errors pass through unchanged). */
const relative = (body: Record<string, unknown>, b: number): Record<string, unknown> => {
  if (!Array.isArray(body.records)) return body;
  const out: Record<string, unknown> = {
    ...body,
    records: (body.records as { offset: number }[]).map((r) => ({ ...r, offset: r.offset - b })),
    next_cursor: (body.next_cursor as number) - b,
    head: (body.head as number) - b,
  };
  const gap = body.gap as Record<string, number> | null;
  if (gap) {
    out.gap = {
      ...gap,
      first_available: gap.first_available! - b,
      ...(gap.fact_offset !== undefined ? { fact_offset: gap.fact_offset - b } : {}),
    };
  }
  return out;
};

const setup = (retention?: RetentionPolicy): Fixture => {
  const { app, hub, store, shutdown, close } = standInRoutes(CAPSULE, createPollRoutes, { retention });
  // Where this fresh log's offsets start (reading the position creates it).
  const base = store.position(CAPSULE).then((p) => p.head);
  cleanups.push(close);
  return {
    app,
    hub,
    store,
    shutdown,
    // Offsets of a new log start at a time floor, not at 1: queries and answers are written relative
    // to where this log starts, so expectations stay readable (the route never assumes 1).
    get: async (query) => {
      const b = await base;
      const q = query.replace(/after=(\d+)/, (_m, n: string) => `after=${b + Number(n)}`);
      const res = await app.request(`/murmur/${CAPSULE}/poll${q}`);
      return {
        status: res.status,
        body: relative((await res.json()) as Record<string, unknown>, b),
        headers: res.headers,
      };
    },
  };
};

const offsets = (body: Record<string, unknown>): number[] =>
  (body.records as { offset: number }[]).map((r) => r.offset);

describe('answers', () => {
  it('returns up to 100 records after 0 by default, with the cursor, head and epoch', async () => {
    const f = setup();
    await f.store.append(CAPSULE, frames(1, 150));
    const { status, body, headers } = await f.get('');
    expect(status).toBe(200);
    expect(headers.get('content-type')).toMatch(/^application\/json/);
    expect(offsets(body)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    const { epoch } = await f.store.position(CAPSULE);
    expect(body).toMatchObject({ next_cursor: 100, head: 150, epoch, gap: null });
    const next = await f.get('?after=100&limit=1000&unknown=ignored');
    expect(offsets(next.body)).toEqual(Array.from({ length: 50 }, (_, i) => i + 101));
    expect(next.body.next_cursor).toBe(150);
  });

  it('shows frames, facts and submissions in their documented shapes', async () => {
    const f = setup();
    const entries: LogEntry[] = [
      { kind: 'frame', event: 'error', upstreamId: '7', data: '{"msg": bad}', receivedAt: T0 },
      { kind: 'frame', event: 'status', upstreamId: null, data: '{"state":"rejected"}', receivedAt: T0 },
      { kind: 'fact', fact: 'upstream-connected', ack: '{"session":"s"}', attempt: 2, receivedAt: T0 },
      {
        kind: 'fact',
        fact: 'frames-possibly-missing',
        reason: 'gap',
        firstAvailableId: '40',
        receivedAt: T0,
      },
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
      {
        kind: 'fact',
        fact: 'frames-possibly-missing',
        reason: 'store-unavailable',
        count: 3,
        receivedAt: T0,
      },
    ];
    await f.store.append(CAPSULE, entries);
    const { body } = await f.get('?after=0');
    expect(body.records).toEqual([
      { offset: 1, kind: 'frame', event: 'error', id: '7', data: '{"msg": bad}', received_at: T0_ISO },
      {
        offset: 2,
        kind: 'frame',
        event: 'status',
        id: null,
        data: '{"state":"rejected"}',
        received_at: T0_ISO,
      },
      {
        offset: 3,
        kind: 'fact',
        fact: 'upstream-connected',
        ack: '{"session":"s"}',
        attempt: 2,
        received_at: T0_ISO,
      },
      {
        offset: 4,
        kind: 'fact',
        fact: 'frames-possibly-missing',
        reason: 'gap',
        first_available_id: '40',
        received_at: T0_ISO,
      },
      {
        offset: 5,
        kind: 'submission',
        protocol: 'beeos',
        owner: 'alice',
        context_id: 'ctx',
        message_id: 'm1',
        text: 'hi',
        meta: { taskId: 't' },
        received_at: T0_ISO,
      },
      {
        offset: 6,
        kind: 'fact',
        fact: 'frames-possibly-missing',
        reason: 'store-unavailable',
        count: 3,
        received_at: T0_ISO,
      },
    ]);
    // The earliest possibly-missing fact of the page names the gap.
    expect(body.gap).toEqual({
      reason: 'possibly_missing',
      first_available: 5,
      fact_offset: 4,
      missing_reason: 'gap',
    });
    const later = await f.get('?after=4');
    expect(later.body.gap).toEqual({
      reason: 'possibly_missing',
      first_available: 7,
      fact_offset: 6,
      missing_reason: 'store-unavailable',
      count: 3,
    });
  });
});

describe('waiting', () => {
  it('parks until an append wakes it', async () => {
    const f = setup();
    await f.store.append(CAPSULE, frames(1, 3));
    const pending = f.get('?after=3&wait=20');
    await vi.waitFor(() => expect(f.hub.capsuleStats(CAPSULE).waiters).toBe(1));
    await f.store.append(CAPSULE, frames(4, 2));
    const { status, body } = await pending;
    expect(status).toBe(200);
    expect(offsets(body)).toEqual([4, 5]);
    expect(body).toMatchObject({ next_cursor: 5, head: 5, gap: null });
  });

  it('times out with no records and the cursor unchanged', async () => {
    const f = setup();
    await f.store.append(CAPSULE, frames(1, 3));
    const { status, body } = await f.get('?after=3&wait=0.05');
    expect(status).toBe(200);
    expect(body).toMatchObject({ records: [], next_cursor: 3, head: 3, gap: null });
    expect(f.hub.capsuleStats(CAPSULE).waiters).toBe(0);
  });

  it('answers a parked poll with no records when the gateway drains', async () => {
    const f = setup();
    const pending = f.get('?after=0&wait=30');
    await vi.waitFor(() => expect(f.hub.capsuleStats(CAPSULE).waiters).toBe(1));
    f.shutdown.abort();
    expect((await pending).body).toMatchObject({ records: [], next_cursor: 0, gap: null });
  });
});

describe('gaps', () => {
  it('starts from the first retained record when the cursor is older than retention', async () => {
    const f = setup({ maxRecords: 10, maxAgeMs: 0 });
    await f.store.append(CAPSULE, frames(1, 30));
    for (const after of [0, 5, 19]) {
      const { body } = await f.get(`?after=${after}&wait=30`);
      expect(offsets(body)).toEqual(Array.from({ length: 10 }, (_, i) => i + 21));
      expect(body).toMatchObject({
        next_cursor: 30,
        head: 30,
        gap: { reason: 'retention', first_available: 21 },
      });
    }
    expect((await f.get('?after=20')).body.gap).toBeNull();
  });

  it('tells a cursor beyond the head to start over, without waiting', async () => {
    const f = setup({ maxRecords: 10, maxAgeMs: 0 });
    await f.store.append(CAPSULE, frames(1, 30));
    const { status, body } = await f.get('?after=31&wait=30');
    expect(status).toBe(200);
    expect(body).toMatchObject({
      records: [],
      next_cursor: 20,
      head: 30,
      gap: { reason: 'ahead', first_available: 21 },
    });
    const empty = setup();
    expect((await empty.get('?after=5&wait=30')).body).toMatchObject({
      records: [],
      next_cursor: 0,
      head: 0,
      gap: { reason: 'ahead', first_available: 1 },
    });
  });
});

describe('bad input', () => {
  const bad = (message: string) => ({ error: { code: 'bad_request', message } });
  const AFTER = bad('after must be a non-negative integer');
  const WAIT = bad('wait must be a number of seconds from 0 to 30');
  const LIMIT = bad('limit must be an integer from 1 to 1000');
  const cases: [string, unknown][] = [
    ['?after=-1', AFTER],
    ['?after=abc', AFTER],
    ['?after=1.5', AFTER],
    ['?after=', AFTER],
    ['?after=%201', AFTER],
    ['?after=1e3', AFTER],
    ['?after=99999999999999999999', AFTER],
    ['?wait=31', WAIT],
    ['?wait=30.5', WAIT],
    ['?wait=-1', WAIT],
    ['?wait=abc', WAIT],
    ['?wait=', WAIT],
    ['?wait=1e1', WAIT],
    ['?limit=0', LIMIT],
    ['?limit=1001', LIMIT],
    ['?limit=1.5', LIMIT],
    ['?limit=-5', LIMIT],
    ['?limit=', LIMIT],
    ['?after=1&after=2', bad('after must be given at most once')],
    ['?wait=1&wait=1', bad('wait must be given at most once')],
    ['?limit=1&limit=2', bad('limit must be given at most once')],
    ['?after=x&wait=99&limit=0', AFTER], // the first bad parameter is named
    ['?wait=99&limit=0', WAIT],
  ];
  it.each(cases)('%s → 400 naming the parameter', async (query, expected) => {
    const f = setup();
    const { status, body } = await f.get(query);
    expect(status).toBe(400);
    expect(body).toEqual(expected);
  });

  it('accepts the edges: after=0, wait=0|30|0.5, limit=1|1000', async () => {
    const f = setup();
    await f.store.append(CAPSULE, frames(1, 2));
    for (const q of [
      '?after=0',
      '?wait=0',
      '?wait=30',
      '?wait=.5',
      '?limit=1',
      '?limit=1000',
      '?after=007',
    ]) {
      expect((await f.get(q)).status).toBe(200);
    }
    expect(offsets((await f.get('?limit=1')).body)).toEqual([1]);
  });

  it('answers an unknown capsule with 404 and other methods with 405', async () => {
    const f = setup();
    for (const path of ['/murmur/nope/poll', '/murmur/nope/poll?after=x', '/murmur/bad%20id/poll']) {
      const res = await f.app.request(path);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: { code: 'capsule_not_found', message: 'no such capsule' } });
    }
    const res = await f.app.request(`/murmur/${CAPSULE}/poll`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
    expect(await res.json()).toEqual({ error: { code: 'method_not_allowed', message: 'use GET' } });
  });
});

describe('over real HTTP', () => {
  it('wakes a parked poll on append, and forgets a client that hangs up', async () => {
    const f = setup();
    const server: ServerType = await new Promise((resolve) => {
      const s = serve({ fetch: f.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        }),
    );
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/murmur/${CAPSULE}/poll`;

    const pending = fetch(`${base}?after=0&wait=20`);
    await vi.waitFor(() => expect(f.hub.capsuleStats(CAPSULE).waiters).toBe(1));
    const [first] = (await f.store.append(CAPSULE, frames(1, 1))).offsets;
    const res = await pending;
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      records: [{ offset: first, kind: 'frame' }],
      next_cursor: first,
    });

    const controller = new AbortController();
    const gone = fetch(`${base}?after=${first}&wait=30`, { signal: controller.signal }).catch(
      (err: Error) => err.name,
    );
    await vi.waitFor(() => expect(f.hub.capsuleStats(CAPSULE).waiters).toBe(1));
    controller.abort();
    expect(await gone).toBe('AbortError');
    await vi.waitFor(() => expect(f.hub.capsuleStats(CAPSULE).waiters).toBe(0));
  });
});
