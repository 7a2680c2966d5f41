/** `live=sse` on the capsule stream over a real Hub and MemoryStore: events, resume, `now`, lifetime, refusals. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createCapsuleStreamRoutes } from '../../../adapters/durable-streams/capsule-stream.js';
import { formatEpochOffset as formatOffset } from '../../../src/http/epoch-offset.js';
import { recordJson } from '../../../src/http/record-json.js';
import type { AdapterConfig, AdapterDeps } from '../../../src/http/adapter-deps.js';
import type { RetentionPolicy } from '../../../src/log/store.js';
import { frames } from '../../hub/helpers.js';
import { standInRoutes } from '../murmur/stand-in-core.js';
import { readSse, type SseEvent } from '../beeos/support/sse-client.js';

/** The surface's error codes by status (stream-errors.ts). */
const CODE: Record<number, string> = { 400: 'bad_request', 404: 'not_found', 410: 'offset_gone' };

const CAPSULE = 'cap-1';
const URL_ = `/v1/stream/murmur/${CAPSULE}`;
const LIFETIME_MS = 400;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const setup = (
  retention?: RetentionPolicy,
  config: Partial<AdapterConfig> = {},
  wrap: (deps: AdapterDeps) => AdapterDeps = (deps) => deps,
) => {
  const { app, store, close } = standInRoutes(
    CAPSULE,
    (deps) => createCapsuleStreamRoutes(wrap(deps), { sseLifetimeMs: LIFETIME_MS }),
    {
      config: { longPollMaxMs: 300, heartbeatMs: 60_000, idleControlMs: 60_000, ...config },
      ...(retention ? { retention } : {}),
    },
  );
  cleanups.push(close);
  return { app, store };
};

interface Control {
  streamNextOffset: string;
  streamCursor: string;
  upToDate?: boolean;
}

/** The stream's data and control events, read until `stop` says so or the server ends it. */
const follow = async (res: Response, stop: (events: SseEvent[]) => boolean = () => false) => {
  const events: SseEvent[] = [];
  let ended = true;
  for await (const ev of readSse(res)) {
    if (ev.event !== 'data' && ev.event !== 'control') continue;
    events.push(ev);
    if (stop(events)) {
      ended = false;
      break;
    }
  }
  if (!ended) await res.body?.cancel();
  const messages = events.filter((e) => e.event === 'data').flatMap((e) => JSON.parse(e.data) as unknown[]);
  const controls = events.filter((e) => e.event === 'control').map((e) => JSON.parse(e.data) as Control);
  return { events, messages, controls, ended };
};

const lastIsUpToDate = (events: SseEvent[]): boolean => {
  const last = events[events.length - 1];
  return last?.event === 'control' && (JSON.parse(last.data) as Control).upToDate === true;
};

describe('capsule stream, live=sse', () => {
  it('sends the log as data events of poll records, each followed by a camelCase control', async () => {
    const { app, store } = setup();
    // A loss fact is a message in its place among the frames.
    await store.append(CAPSULE, [
      ...frames(1, 2),
      { kind: 'fact', fact: 'frames-possibly-missing', reason: 'gap', firstAvailableId: '9', receivedAt: 1 },
      ...frames(3, 3),
    ]);
    const res = await app.request(`${URL_}?offset=-1&live=sse`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    expect(res.headers.get('cache-control')).toBe('no-store');
    const { events, messages, controls } = await follow(res, lastIsUpToDate);
    const { records, position } = await store.read(CAPSULE, 0, 100);
    expect(messages).toEqual(records.map(recordJson));
    expect((messages[2] as { fact?: string }).fact).toBe('frames-possibly-missing');
    expect(events.map((e) => e.event)).toEqual(['data', 'control']);
    expect(controls[0]).toEqual({
      streamNextOffset: formatOffset(position.epoch, position.head),
      streamCursor: expect.stringMatching(/^\d+$/) as unknown,
      upToDate: true,
    });
  });

  it('catches up a log of large records past the per-client byte bound, in events within it', async () => {
    const { app, store } = setup();
    // 600 frames of about 4 KB: 2.4 MB, two hub pages of 500 records each over the 1 MiB bound.
    const big = 'x'.repeat(4000);
    await store.append(
      CAPSULE,
      frames(1, 600).map((f) => ({ ...f, data: JSON.stringify({ id: 't1', text: big }) })),
    );
    const res = await app.request(`${URL_}?offset=-1&live=sse`);
    const { events, messages, controls, ended } = await follow(res, lastIsUpToDate);
    expect(ended).toBe(false);
    expect(messages).toHaveLength(600);
    const { records, position } = await store.read(CAPSULE, 0, 1000);
    expect(messages.map((m) => (m as { offset: number }).offset)).toEqual(records.map((r) => r.offset));
    expect(controls.at(-1)!.streamNextOffset).toBe(formatOffset(position.epoch, position.head));
    // Each data event followed by its control, and none near the bound.
    for (let i = 0; i < events.length; i += 2) {
      expect(events[i]!.event).toBe('data');
      expect(events[i + 1]!.event).toBe('control');
      expect(events[i]!.data.length).toBeLessThan(512 * 1024);
    }
  });

  it('resumes after any offset and follows live appends in order', async () => {
    const { app, store } = setup();
    await store.append(CAPSULE, frames(1, 6));
    const { epoch, first } = await store.position(CAPSULE);
    const from = first + 2;
    const res = await app.request(`${URL_}?offset=${formatOffset(epoch, from)}&live=sse`);
    let appended = false;
    const { messages, controls } = await follow(res, (events) => {
      if (!appended && lastIsUpToDate(events)) {
        appended = true;
        void store.append(CAPSULE, frames(7, 2));
      }
      return appended && events.filter((e) => e.event === 'control').length >= 2 && lastIsUpToDate(events);
    });
    const { records, position } = await store.read(CAPSULE, from, 100);
    expect(records).toHaveLength(5);
    expect(messages).toEqual(records.map(recordJson));
    expect(controls.at(-1)!.streamNextOffset).toBe(formatOffset(epoch, position.head));
    // Cursors never go backwards within a connection.
    const cursors = controls.map((c) => Number(c.streamCursor));
    expect([...cursors].sort((a, b) => a - b)).toEqual(cursors);
  });

  it('connections of one capsule share one hub subscription, which closes with the last of them', async () => {
    let opened = 0;
    let closed = 0;
    const { app, store } = setup(undefined, {}, (deps) => ({
      ...deps,
      core: {
        ...deps.core,
        subscribe: (capsule, options) => {
          opened++;
          const sub = deps.core.subscribe(capsule, options);
          return { close: () => (closed++, sub.close()) };
        },
      },
    }));
    await store.append(CAPSULE, frames(1, 3));
    const { epoch, first, head } = await store.position(CAPSULE);
    const offsetsOf = (events: SseEvent[]): number[] =>
      events
        .filter((e) => e.event === 'data')
        .flatMap((e) => JSON.parse(e.data) as { offset: number }[])
        .map((m) => m.offset);
    // Three readers from three points: each catches up on its own, then follows the one feed; the
    // log moves on once all three are up to date.
    let upToDate = 0;
    const readers = ['-1', formatOffset(epoch, first), 'now'].map(async (offset) => {
      let counted = false;
      const res = await app.request(`${URL_}?offset=${offset}&live=sse`);
      return follow(res, (events) => {
        if (!counted && lastIsUpToDate(events)) {
          counted = true;
          if (++upToDate === 3) void store.append(CAPSULE, frames(4, 2));
        }
        return offsetsOf(events).includes(head + 2);
      });
    });
    const results = await Promise.all(readers);
    const range = (from: number): number[] => Array.from({ length: head + 3 - from }, (_, i) => from + i);
    expect(results.map((r) => offsetsOf(r.events))).toEqual([
      range(first),
      range(first + 1),
      range(head + 1),
    ]);
    expect(opened).toBe(1);
    await vi.waitFor(() => expect(closed).toBe(1));
  });

  it('offset=now: the first control names the tail, up to date, and only later records follow', async () => {
    const { app, store } = setup();
    await store.append(CAPSULE, frames(1, 3));
    const { epoch, head } = await store.position(CAPSULE);
    const res = await app.request(`${URL_}?offset=now&live=sse`);
    let appended = false;
    const { events, messages, controls } = await follow(res, (evs) => {
      if (!appended) {
        appended = true;
        void store.append(CAPSULE, frames(4, 1));
        return false;
      }
      return evs.some((e) => e.event === 'data') && evs.at(-1)!.event === 'control';
    });
    expect(events[0]!.event).toBe('control');
    expect(controls[0]).toMatchObject({ streamNextOffset: formatOffset(epoch, head), upToDate: true });
    expect((messages as { offset: number }[]).map((m) => m.offset)).toEqual([head + 1]);
  });

  it('the server ends the connection after its lifetime; the client resumes from the last control', async () => {
    const { app, store } = setup();
    await store.append(CAPSULE, frames(1, 2));
    const opened = Date.now();
    const { ended, controls } = await follow(await app.request(`${URL_}?offset=-1&live=sse`));
    expect(ended).toBe(true);
    expect(Date.now() - opened).toBeGreaterThanOrEqual(LIFETIME_MS - 50);
    const again = await app.request(`${URL_}?offset=${controls.at(-1)!.streamNextOffset}&live=sse`);
    expect(again.status).toBe(200);
    const resumed = await follow(again, lastIsUpToDate);
    expect(resumed.messages).toEqual([]);
  });

  it('an idle stream gets a control again after idleControlMs, with nothing new to send', async () => {
    const { app, store } = setup(undefined, { idleControlMs: 100 });
    await store.append(CAPSULE, frames(1, 2));
    const { epoch, head } = await store.position(CAPSULE);
    const res = await app.request(`${URL_}?offset=now&live=sse`);
    const { events, controls } = await follow(res, (evs) => evs.length >= 2);
    expect(events.map((e) => e.event)).toEqual(['control', 'control']);
    for (const c of controls)
      expect(c).toMatchObject({ streamNextOffset: formatOffset(epoch, head), upToDate: true });
  });

  it('records missing under a reader (trimmed as it read) end its stream after the last it had', async () => {
    let skip = 0;
    // The log reads and the hub hand this reader the log without one record, as a trim between
    // its reads would.
    const { app, store } = setup(undefined, {}, (deps) => ({
      ...deps,
      core: {
        ...deps.core,
        read: async (capsule, after, limit) => {
          const page = await deps.core.read(capsule, after, limit);
          return { ...page, records: page.records.filter((r) => r.offset !== skip) };
        },
        subscribe: (capsule, options) =>
          deps.core.subscribe(capsule, {
            ...options,
            onRecords: (records) => options.onRecords(records.filter((r) => r.offset !== skip)),
          }),
      },
    }));
    await store.append(CAPSULE, frames(1, 5));
    const { epoch, first } = await store.position(CAPSULE);
    skip = first + 2;
    const { ended, messages, controls } = await follow(await app.request(`${URL_}?offset=-1&live=sse`));
    expect(ended).toBe(true);
    expect((messages as { offset: number }[]).map((m) => m.offset)).toEqual([first, first + 1]);
    expect(controls.at(-1)!.streamNextOffset).toBe(formatOffset(epoch, first + 1));
  });

  it('refuses bad input before the stream opens, with the exact status and body', async () => {
    const { app, store } = setup({ maxRecords: 3, maxAgeMs: 0 });
    await store.append(CAPSULE, frames(1, 10));
    await store.trim(CAPSULE);
    const { epoch, first, head } = await store.position(CAPSULE);
    expect(head - first).toBe(2);
    const cases: [string, number, string][] = [
      [`${URL_}?offset=abc&live=sse`, 400, 'malformed offset'],
      [`${URL_}?offset=${formatOffset(epoch, head)}x&live=sse`, 400, 'malformed offset'],
      [
        `${URL_}?offset=${formatOffset(epoch, head + 1)}&live=sse`,
        400,
        'offset beyond the tail of the stream',
      ],
      [`${URL_}?offset=${formatOffset(epoch + 1, 1)}&live=sse`, 410, 'offset from another epoch of this log'],
      [`${URL_}?offset=${formatOffset(epoch, first - 2)}&live=sse`, 410, 'offset older than retention'],
      [`/v1/stream/murmur/no-such-capsule?offset=-1&live=sse`, 404, 'no such stream'],
      [`${URL_}?offset=-1&live=SSE`, 400, 'live must be long-poll or sse'],
      [`${URL_}?offset=-1&live=websocket`, 400, 'live must be long-poll or sse'],
    ];
    for (const [url, status, error] of cases) {
      const res = await app.request(url);
      expect({ url, status: res.status }).toEqual({ url, status });
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await res.json()).toEqual({ error: { code: CODE[status]!, message: error } });
    }
  });
});
