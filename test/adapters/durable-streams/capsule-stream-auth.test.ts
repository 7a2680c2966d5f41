/**
 * Who may read a capsule stream, through the real gateway's auth: the `observe` scope, a capsule
 * outside the key's list answered as an unknown one, and tickets (`POST /auth/tickets`, `?ticket=`)
 * on live reads only, the way an EventSource must send its credential.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../src/auth/admin-token.js';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { readSse } from '../beeos/support/sse-client.js';

const KEY = {
  observe: `key-observe-${'a'.repeat(24)}`,
  submitOnly: `key-submit-${'b'.repeat(24)}`,
  otherCapsule: `key-other-${'c'.repeat(24)}`,
};
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

let sim: SimulatedCapsule | null = null;
let gw: TestGateway | null = null;
afterEach(async () => {
  await gw?.close();
  await sim?.stop();
  sim = gw = null;
});

const setup = async (): Promise<{ base: string; url: string }> => {
  sim = await startSimulator({});
  gw = await startTestGateway({
    capsules: { alpha: sim.url },
    // A long-poll from the tail waits for a record the idle simulator may never write: 204 soon.
    config: { longPollMaxMs: 1000 },
    extra: {
      auth: {
        apiKeys: [
          { sha256: sha256Hex(KEY.observe), owner: 'operator', scopes: ['observe'] },
          { sha256: sha256Hex(KEY.submitOnly), owner: 'alice', scopes: ['submit'] },
          { sha256: sha256Hex(KEY.otherCapsule), owner: 'bob', scopes: ['observe'], capsules: ['beta'] },
        ],
        ticketSecret: 'capsule-stream-ticket-secret-0123',
      },
    },
  });
  return { base: gw.baseUrl, url: `${gw.baseUrl}/v1/stream/murmur/alpha` };
};

/** The first control event of an SSE response (the stream is then cancelled). */
const firstControl = async (res: Response): Promise<Record<string, unknown>> => {
  let data: string | null = null;
  for await (const ev of readSse(res)) {
    if (ev.event !== 'control') continue;
    data = ev.data;
    break;
  }
  await res.body?.cancel();
  if (data === null) throw new Error('the stream ended without a control event');
  return JSON.parse(data) as Record<string, unknown>;
};

describe('capsule stream auth', () => {
  it('needs the observe scope; a capsule outside the key list is the same 404 as an unknown one', async () => {
    const { base, url } = await setup();
    const anonymous = await fetch(`${url}?offset=now&live=sse`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="murmur-gateway"');
    expect(await anonymous.json()).toEqual({
      error: { code: 'unauthorized', message: 'credentials required' },
    });

    const submitOnly = await fetch(`${url}?offset=now&live=sse`, { headers: bearer(KEY.submitOnly) });
    expect(submitOnly.status).toBe(403);
    expect(await submitOnly.json()).toEqual({
      error: { code: 'forbidden', message: 'needs the "observe" scope' },
    });

    const unknown = await fetch(`${base}/v1/stream/murmur/no-such-capsule?offset=now&live=sse`, {
      headers: bearer(KEY.observe),
    });
    for (const live of ['sse', 'long-poll', undefined]) {
      const q = live ? `?offset=now&live=${live}` : '?offset=-1';
      const outside = await fetch(`${url}${q}`, { headers: bearer(KEY.otherCapsule) });
      expect(outside.status).toBe(404);
      expect(await outside.text()).toBe('{"error":{"code":"not_found","message":"no such stream"}}');
    }
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toBe('{"error":{"code":"not_found","message":"no such stream"}}');

    const allowed = await fetch(`${url}?offset=now&live=sse`, { headers: bearer(KEY.observe) });
    expect(allowed.status).toBe(200);
    expect(await firstControl(allowed)).toMatchObject({ upToDate: true });
  });

  it('a ticket from an observe key opens live=sse and long-poll (EventSource), never a catch-up read', async () => {
    const { base, url } = await setup();
    const issued = await fetch(`${base}/auth/tickets`, { method: 'POST', headers: bearer(KEY.observe) });
    expect(issued.status).toBe(200);
    const { ticket } = (await issued.json()) as { ticket: string };
    const t = encodeURIComponent(ticket);

    const sse = await fetch(`${url}?offset=-1&live=sse&ticket=${t}`);
    expect(sse.status).toBe(200);
    expect(sse.headers.get('content-type')).toBe('text/event-stream');
    expect(sse.headers.get('cache-control')).toBe('no-store');
    expect(typeof (await firstControl(sse)).streamNextOffset).toBe('string');

    const head = (await fetch(`${url}?offset=now`, { headers: bearer(KEY.observe) })).headers;
    const tail = head.get('stream-next-offset')!;
    const poll = await fetch(`${url}?offset=${tail}&live=long-poll&ticket=${t}`);
    expect([200, 204]).toContain(poll.status);

    const catchUp = await fetch(`${url}?offset=-1&ticket=${t}`);
    expect(catchUp.status).toBe(401);
    expect(await catchUp.json()).toEqual({
      error: { code: 'unauthorized', message: 'credentials required' },
    });

    const forged = await fetch(`${url}?offset=-1&live=sse&ticket=${t.slice(0, -2)}AA`);
    expect(forged.status).toBe(401);
    expect(forged.headers.get('www-authenticate')).toBe(
      'Bearer realm="murmur-gateway", error="invalid_token"',
    );

    // A ticket from a submit-only key carries only its scopes.
    const weak = await fetch(`${base}/auth/tickets`, { method: 'POST', headers: bearer(KEY.submitOnly) });
    const weakTicket = encodeURIComponent(((await weak.json()) as { ticket: string }).ticket);
    expect((await fetch(`${url}?offset=-1&live=sse&ticket=${weakTicket}`)).status).toBe(403);
  });
});
