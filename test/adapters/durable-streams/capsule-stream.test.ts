/** The read-only capsule stream over a real Hub and MemoryStore: catch-up, long-poll, offsets, errors. */
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { createCapsuleStreamRoutes } from '../../../adapters/durable-streams/capsule-stream.js';
import { formatEpochOffset as formatOffset } from '../../../src/http/epoch-offset.js';
import { recordJson } from '../../../src/http/record-json.js';
import { setPrincipal, type Principal } from '../../../src/auth/principal.js';
import type { AdapterDeps } from '../../../src/http/adapter-deps.js';
import { frames } from '../../hub/helpers.js';
import { standInRoutes } from '../murmur/stand-in-core.js';

const CAPSULE = 'cap-1';
const URL_ = `/v1/stream/murmur/${CAPSULE}`;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const setup = (principal?: Principal) => {
  const routes = (deps: AdapterDeps): Hono => {
    const app = new Hono();
    if (principal)
      app.use('*', async (c, next) => {
        setPrincipal(c, principal);
        await next();
      });
    return app.route('/', createCapsuleStreamRoutes(deps));
  };
  const { app, store, close } = standInRoutes(CAPSULE, routes, { config: { longPollMaxMs: 300 } });
  cleanups.push(close);
  return { app, store };
};

describe('capsule stream', () => {
  it('serves the log as JSON messages equal to the poll records, then is up to date', async () => {
    const { app, store } = setup();
    await store.append(CAPSULE, frames(1, 5));
    const res = await app.request(`${URL_}?offset=-1`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as unknown[];
    const { records, position } = await store.read(CAPSULE, 0, 100);
    expect(body).toEqual(records.map(recordJson));
    expect(res.headers.get('stream-next-offset')).toBe(formatOffset(position.epoch, position.head));
    expect(res.headers.get('stream-up-to-date')).toBe('true');
    const etag = res.headers.get('etag')!;
    const again = await app.request(`${URL_}?offset=-1`, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
  });

  it('long-poll answers 204 with a cursor on timeout and 200 when a record lands', async () => {
    const { app, store } = setup();
    await store.append(CAPSULE, frames(1, 1));
    const { epoch, head } = await store.position(CAPSULE);
    const idle = await app.request(`${URL_}?offset=${formatOffset(epoch, head)}&live=long-poll`);
    expect(idle.status).toBe(204);
    expect(idle.headers.get('stream-cursor')).toMatch(/^\d+$/);
    const pending = app.request(`${URL_}?offset=${formatOffset(epoch, head)}&live=long-poll`);
    await store.append(CAPSULE, frames(2, 1));
    const res = await pending;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { offset: number }[]).map((r) => r.offset)).toEqual([head + 1]);
  });

  it('refuses bad offsets, other epochs and writes with the exact status', async () => {
    const { app, store } = setup();
    await store.append(CAPSULE, frames(1, 2));
    const { epoch } = await store.position(CAPSULE);
    expect((await app.request(`${URL_}?offset=abc`)).status).toBe(400);
    expect((await app.request(`${URL_}?offset=${formatOffset(epoch + 1, 1)}`)).status).toBe(410);
    const post = await app.request(URL_, { method: 'POST', body: '[]' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expect(await post.json()).toEqual({
      error: { code: 'method_not_allowed', message: 'capsule streams are read-only' },
    });
    for (const method of ['PUT', 'DELETE']) {
      const refused = await app.request(URL_, { method });
      expect({ method, status: refused.status, allow: refused.headers.get('allow') }).toEqual({
        method,
        status: 405,
        allow: 'GET, HEAD',
      });
    }
    const { records } = await store.read(CAPSULE, 0, 100);
    expect(records).toHaveLength(2);
  });

  it('a page short of the tail is cacheable: public without auth, private for a credential', async () => {
    const key: Principal = {
      kind: 'key',
      owner: 'operator',
      scopes: new Set(['observe']),
      capsules: '*',
      keyId: 'k',
      ip: '127.0.0.1',
    };
    for (const [principal, scope] of [
      [undefined, 'public'],
      [key, 'private'],
    ] as const) {
      const { app, store } = setup(principal);
      await store.append(CAPSULE, frames(1, 1001));
      const page = await app.request(`${URL_}?offset=-1`);
      expect(page.headers.get('stream-up-to-date')).toBeNull();
      expect(page.headers.get('cache-control')).toBe(`${scope}, max-age=60, stale-while-revalidate=300`);
      const rest = await app.request(`${URL_}?offset=${page.headers.get('stream-next-offset')!}`);
      expect(rest.headers.get('stream-up-to-date')).toBe('true');
      expect(rest.headers.get('cache-control')).toBe('no-cache');
    }
  });
});
