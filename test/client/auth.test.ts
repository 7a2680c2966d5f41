/**
 * The exact requests the client makes for its credentials, seen by a tiny stand-in server
 * (`POST /auth/tickets` with Bearer → `{ticket, expires_at}`; `?ticket=` on the stream URL; Bearer
 * on long-polls). The same against the real gateway's auth: gateway-auth.test.ts.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  followCapsule,
  TicketSource,
  type CapsuleRecord,
  type Subscription,
} from '../../src/client/index.js';

let server: Server | null = null;
let sub: Subscription | null = null;
afterEach(async () => {
  sub?.close();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = sub = null;
});

const serve = async (handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> => {
  server = createServer(handler);
  server.keepAliveTimeout = 1;
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

describe('client credentials', () => {
  it('TicketSource: Bearer on POST /auth/tickets, reuses a ticket, fetches a new one near expiry', async () => {
    const seen: string[] = [];
    let n = 0;
    let ttlMs = 60_000;
    const base = await serve((req, res) => {
      seen.push(`${req.method} ${req.url} ${req.headers.authorization}`);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ ticket: `tk-${++n}`, expires_at: new Date(Date.now() + ttlMs).toISOString() }),
      );
    });
    let calls = 0;
    const tickets = new TicketSource(base, async () => `key-${++calls}`);
    expect(await tickets.get()).toBe('tk-1');
    expect(await tickets.get()).toBe('tk-1'); // still valid for a minute
    ttlMs = 5_000; // a short ticket is reused for half its life
    tickets.invalidate();
    expect(await tickets.get()).toBe('tk-2');
    expect(await tickets.get()).toBe('tk-2');
    expect(await tickets.take()).toEqual({ ticket: 'tk-2', fresh: false });
    ttlMs = -1_000; // expired already by this clock (skew): fetched again every time, never reused
    tickets.invalidate();
    expect(await tickets.take()).toEqual({ ticket: 'tk-3', fresh: true });
    expect(await tickets.take()).toEqual({ ticket: 'tk-4', fresh: true });
    expect(seen).toEqual([
      'POST /auth/tickets Bearer key-1',
      'POST /auth/tickets Bearer key-2',
      'POST /auth/tickets Bearer key-3',
      'POST /auth/tickets Bearer key-4',
    ]);
  });

  it('followCapsule: long-poll sends Authorization: Bearer; a 401 closes the subscription', async () => {
    const auth: (string | undefined)[] = [];
    const base = await serve((req, res) => {
      auth.push(req.headers.authorization);
      if (auth.length > 1) {
        res.writeHead(401, { 'content-type': 'application/json' });
        return res.end('{"error":{"code":"unauthorized"}}');
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          records: [
            { offset: 30000000000001, kind: 'frame', event: 'text', id: '0', data: '{}', received_at: 'x' },
          ],
          next_cursor: 30000000000001,
          head: 30000000000001,
          epoch: 1,
          gap: null,
        }),
      );
    });
    const records: CapsuleRecord[] = [];
    const closed = new Promise<string>((resolve) => {
      sub = followCapsule({
        gateway: base,
        capsule: 'alpha',
        transport: 'long-poll',
        token: 'secret',
        onRecord: (r) => records.push(r),
        onState: (s) => s.state === 'closed' && resolve(s.reason ?? ''),
      });
    });
    expect(await closed).toMatch(/401/);
    expect(auth).toEqual(['Bearer secret', 'Bearer secret']);
    expect(records.map((r) => r.offset)).toEqual([30000000000001]);
  });

  const RECORD = {
    offset: 30000000000005,
    kind: 'frame',
    event: 'text',
    id: '3',
    data: '{"text":"hi"}',
    received_at: '2026-01-01T00:00:00.000Z',
  };

  it('followCapsule with useEventSource: fetches a ticket and passes it as ?ticket=, no header', async () => {
    const requests: { url: string; auth?: string }[] = [];
    const base = await serve((req, res) => {
      requests.push({
        url: req.url ?? '',
        ...(req.headers.authorization ? { auth: req.headers.authorization } : {}),
      });
      if (req.url === '/auth/tickets') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ ticket: 't/1', expires_at: Date.now() + 60_000 }));
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: ready\ndata: {"head":30000000000005,"epoch":1}\n\n');
      res.write(`id: 30000000000005\nevent: record\ndata: ${JSON.stringify(RECORD)}\n\n`);
    });
    const got = new Promise<CapsuleRecord>((resolve) => {
      sub = followCapsule({
        gateway: base,
        capsule: 'alpha',
        transport: 'sse',
        token: 'secret',
        useEventSource: true, // Node 20 has no EventSource: the streamed fetch carries the ticket instead
        onRecord: resolve,
      });
    });
    expect(await got).toEqual(RECORD);
    expect(requests).toEqual([
      { url: '/auth/tickets', auth: 'Bearer secret' },
      { url: '/murmur/alpha/records?after=0&ticket=t%2F1' },
    ]);
  });
});
