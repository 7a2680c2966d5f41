/**
 * `GET /v1/follow`: two capsules' logs over one connection, through a proxy that cuts every
 * connection after 400 ms. The `eventsource` client reconnects on its own with nothing but
 * `Last-Event-ID`, and each stream still gets every record of its log once, in order. The long-poll
 * answers what is there, holds until a stream gets something, and hands back every cursor. Every
 * bad request is refused whole, with the exact error.
 */
import { EventSource } from 'eventsource';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { runBusy } from '../../client/busy-capsule.js';
import { startCuttingProxy, type CuttingProxy } from '../../client/cutting-proxy.js';
import { loggedRecords } from '../../client/log-frames.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { quickRetryFetch, sha256 } from './follow-support.js';

const sims: SimulatedCapsule[] = [];
let gw: TestGateway | null = null;
let proxy: CuttingProxy | null = null;
afterEach(async () => {
  await proxy?.close();
  await gw?.close();
  await Promise.all(sims.splice(0).map((s) => s.stop()));
  proxy = null;
  gw = null;
});

const start = async (n: number, config: Parameters<typeof startTestGateway>[0]['config'] = {}) => {
  const capsules: Record<string, string> = {};
  for (let i = 0; i < n; i++) {
    const sim = await startSimulator({ heartbeatMs: 200, taskAcceptance: 'queue' });
    sims.push(sim);
    capsules[`cap${i}`] = sim.url;
  }
  gw = await startTestGateway({ capsules, config });
  return gw;
};

interface Delivered {
  stream: string;
  cursor: string;
  event: string;
  data: { offset: number } & Record<string, unknown>;
}

const get = async (url: string, headers: Record<string, string> = {}) => {
  const res = await fetch(url, { headers });
  return { status: res.status, body: (await res.json()) as unknown };
};

describe('GET /v1/follow', () => {
  it('two logs over one EventSource through a cutting proxy: every record once, in order, per stream', async () => {
    const g = await start(2);
    proxy = await startCuttingProxy(g.baseUrl, { lifetimeMs: 400 });
    const got: Delivered[] = [];
    const es = new EventSource(`${proxy.url}/v1/follow?stream=murmur:cap0@-1&stream=murmur:cap1@-1`, {
      fetch: quickRetryFetch(),
    });
    es.onmessage = (e) => got.push(JSON.parse(e.data) as Delivered);
    const [last0, last1] = await Promise.all([runBusy(sims[0]!, 6, 20, 15), runBusy(sims[1]!, 6, 20, 15)]);
    // The capsule's last frame, once the gateway has logged it.
    const offsetOf = async (capsule: string, data: string): Promise<number> => {
      let at = -1;
      await expect
        .poll(
          async () =>
            (at =
              ((await loggedRecords(g.core, capsule)).findLast((r) => r.data === data)?.offset as number) ??
              -1),
          { timeout: 10_000, interval: 20 },
        )
        .toBeGreaterThan(0);
      return at;
    };
    const upTo = { cap0: await offsetOf('cap0', last0.data), cap1: await offsetOf('cap1', last1.data) };
    const reached = (k: 'cap0' | 'cap1') =>
      got.some((d) => d.stream === `murmur:${k}` && d.data.offset >= upTo[k]);
    await expect.poll(() => reached('cap0') && reached('cap1'), { timeout: 30_000, interval: 50 }).toBe(true);
    es.close();
    expect(proxy.kills).toBeGreaterThan(2);
    for (const k of ['cap0', 'cap1'] as const) {
      const mine = got.filter((d) => d.stream === `murmur:${k}` && d.data.offset <= upTo[k]);
      expect(mine.every((d) => d.event === 'record' && d.cursor === String(d.data.offset))).toBe(true);
      expect(mine.map((d) => d.data)).toEqual(await loggedRecords(g.core, k, upTo[k]));
    }
  }, 60_000);

  it('long-poll: what is there at once, else held until a stream gets something; cursors for next time', async () => {
    const g = await start(2);
    const base = `${g.baseUrl}/v1/follow?stream=murmur:cap0@-1&stream=murmur:cap1@now&live=long-poll`;
    await sims[0]!.submit('#sim {"reply":"first"}').done;
    const head1 = (await g.core.position('cap1')).head;
    const first = (await get(base)).body as { events: Delivered[]; cursors: Record<string, string> };
    expect(first.events.every((e) => e.stream === 'murmur:cap0')).toBe(true);
    const head0 = first.events[first.events.length - 1]!.data.offset;
    expect(first.events.map((e) => e.data)).toEqual(await loggedRecords(g.core, 'cap0', head0));
    expect(first.cursors).toEqual({ 'murmur:cap0': String(head0), 'murmur:cap1': String(head1) });
    // Nothing new: held until cap1 writes.
    const next = `${g.baseUrl}/v1/follow?stream=murmur:cap0@${head0}&stream=murmur:cap1@${head1}&live=long-poll`;
    const held = get(next);
    await sims[1]!.submit('#sim {"reply":"second"}').done;
    const second = (await held).body as { events: Delivered[]; cursors: Record<string, string> };
    expect(second.events.length).toBeGreaterThan(0);
    expect(second.events.every((e) => e.stream === 'murmur:cap1' && e.data.offset > head1)).toBe(true);
    expect(second.cursors['murmur:cap0']).toBe(String(head0));
    // A shorter hold asked for (a client behind a proxy that cuts idle connections): empty when it ends.
    const short = await get(`${g.baseUrl}/v1/follow?stream=murmur:cap0@${head0}&live=long-poll&wait=0.2`);
    expect(short.body).toEqual({ events: [], cursors: { 'murmur:cap0': String(head0) } });
  }, 30_000);

  it('refuses a bad request whole, with the exact error', async () => {
    const g = await start(1);
    const f = (q: string, headers?: Record<string, string>) => get(`${g.baseUrl}/v1/follow${q}`, headers);
    const err = (status: number, code: string, message: string) => ({
      status,
      body: { error: { code, message } },
    });
    expect(await f('')).toEqual(err(400, 'bad_request', 'name at least one stream=KEY@CURSOR'));
    expect(await f('?stream=murmur:nope@-1')).toEqual(err(404, 'not_found', 'no such stream: murmur:nope'));
    expect(await f('?stream=murmur:cap0@-1&stream=flue:cap0/x@-1')).toEqual(
      err(404, 'not_found', 'no such stream: flue:cap0/x'),
    );
    expect(await f('?stream=nokey@-1')).toEqual(err(400, 'bad_request', 'not a stream key: "nokey"'));
    expect(await f('?stream=murmur:cap0@12x')).toEqual(
      err(400, 'bad_request', 'murmur:cap0: the cursor must be -1, now or an offset'),
    );
    expect(await f('?stream=murmur:cap0@-1&stream=murmur:cap0@5')).toEqual(
      err(400, 'bad_request', 'stream murmur:cap0 is named twice'),
    );
    expect(await f('?stream=murmur:cap0&live=push')).toEqual(
      err(400, 'bad_request', 'live must be sse or long-poll'),
    );
    expect(await f('?stream=murmur:cap0', { 'last-event-id': 'v1.bm9wZQ' })).toEqual(
      err(400, 'bad_request', 'Last-Event-ID is not a token of these streams'),
    );
    expect(await f('?stream=murmur:cap0&wait=1')).toEqual(
      err(400, 'bad_request', 'wait is for live=long-poll'),
    );
    expect(await f('?stream=murmur:cap0&live=long-poll&wait=1s')).toEqual(
      err(400, 'bad_request', 'wait must be a number of seconds'),
    );
    expect(await f('?stream=murmur:cap0&live=long-poll&wait=1&wait=2')).toEqual(
      err(400, 'bad_request', 'wait is given more than once'),
    );
    const many = Array.from({ length: 257 }, (_, i) => `stream=murmur:c${i}@-1`).join('&');
    expect(await f(`?${many}`)).toEqual(err(400, 'bad_request', 'at most 256 streams per connection'));
    const post = await fetch(`${g.baseUrl}/v1/follow?stream=murmur:cap0`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(await post.json()).toEqual({ error: { code: 'method_not_allowed', message: 'use GET' } });
  });

  it('auth: no credential is 401; a stream outside the key is 404 as an unknown one; a ticket works', async () => {
    const key = 'follow-observer-key-0123456789';
    const submitOnly = 'follow-submit-key-0123456789';
    const sim = await startSimulator({ heartbeatMs: 200 });
    sims.push(sim);
    gw = await startTestGateway({
      capsules: { cap0: sim.url },
      extra: {
        auth: {
          apiKeys: [
            { sha256: sha256(key), owner: 'ops-person', scopes: ['observe'] },
            { sha256: sha256(submitOnly), owner: 'alice', scopes: ['submit'] },
          ],
        },
      },
    });
    const url = `${gw.baseUrl}/v1/follow?stream=murmur:cap0@-1&live=long-poll`;
    expect(await get(url)).toEqual({
      status: 401,
      body: {
        error: { code: 'unauthorized', message: 'a valid credential is required (Authorization: Bearer …)' },
      },
    });
    expect(await get(url, { authorization: `Bearer ${submitOnly}` })).toEqual({
      status: 404,
      body: { error: { code: 'not_found', message: 'no such stream: murmur:cap0' } },
    });
    await sim.submit('#sim {"reply":"seen"}').done;
    const ok = await get(url, { authorization: `Bearer ${key}` });
    expect(ok.status).toBe(200);
    const ticket = (await (
      await fetch(`${gw.baseUrl}/auth/tickets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
      })
    ).json()) as { ticket: string };
    const byTicket = await get(`${url}&ticket=${encodeURIComponent(ticket.ticket)}`);
    expect(byTicket.status).toBe(200);
    expect(byTicket.body).toEqual(ok.body);
  });
});
