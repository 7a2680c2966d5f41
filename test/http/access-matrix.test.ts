/**
 * The access matrix: every route of every surface on a real gateway × every kind of
 * credential → the expected status in that surface's own error grammar; and for reads, no record of
 * another owner in the body.
 */
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/auth/admin-token.js';
import { createTicketAuthority } from '../../src/auth/tickets.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { collectSse } from '../adapters/beeos/support/sse-client.js';

const ALL = ['submit', 'observe', 'control', 'admin', 'ops'] as const;
const KEY = {
  valid: `oag_${'a1'.repeat(32)}`,
  otherOwner: `key-bob-${'b'.repeat(24)}`,
  noScope: `key-noscope-${'c'.repeat(20)}`,
  otherCapsule: `key-beta-${'d'.repeat(22)}`,
  wrong: `oag_${'e5'.repeat(32)}`,
};
const JWT_SECRET = 'jwt-secret-for-the-access-matrix';
const TICKET_SECRET = 'ticket-secret-for-the-access-matrix';
const ADMIN_TOKEN = 'admin-token-of-the-matrix';
const ALICE_TEXT = `ALICE-SECRET-${randomUUID()}`;
const ALICE_FLUE = `ALICE-FLUE-${randomUUID()}`;

let sim: SimulatedCapsule;
let gw: TestGateway;
let aliceTask = '';
let validTicket = '';
let expiredTicket = '';
let expiredJwt = '';

const bearer = (k: string) => ({ Authorization: `Bearer ${k}` });

beforeAll(async () => {
  sim = await startSimulator({ heartbeatMs: 1_000 });
  gw = await startTestGateway({
    capsules: { alpha: sim.url, beta: sim.url },
    extra: {
      auth: {
        apiKeys: [
          { sha256: sha256Hex(KEY.valid), owner: 'alice', scopes: [...ALL], capsules: ['alpha'] },
          { sha256: sha256Hex(KEY.otherOwner), owner: 'bob', scopes: [...ALL] },
          { sha256: sha256Hex(KEY.noScope), owner: 'alice', scopes: [] },
          { sha256: sha256Hex(KEY.otherCapsule), owner: 'alice', scopes: [...ALL], capsules: ['beta'] },
        ],
        jwt: { issuer: 'https://id.test', audience: 'murmur-gateway', secret: JWT_SECRET },
        ticketSecret: TICKET_SECRET,
        adminTokens: [{ sha256: sha256Hex(ADMIN_TOKEN) }],
      },
    },
  });
  // Alice's records: a BeeOS task in a chosen context, and a Flue conversation.
  const inv = await fetch(`${gw.baseUrl}/api/v1/agents/alpha/invoke`, {
    method: 'POST',
    headers: { ...bearer(KEY.valid), 'content-type': 'application/json' },
    body: JSON.stringify({ message: ALICE_TEXT, context_id: 'shared-ctx' }),
  });
  expect(inv.status).toBe(200);
  const created = await fetch(`${gw.baseUrl}/api/v1/agents/alpha/tasks`, {
    method: 'POST',
    headers: { ...bearer(KEY.valid), 'content-type': 'application/json' },
    body: JSON.stringify({ message: ALICE_TEXT }),
  });
  expect(created.status).toBe(202);
  aliceTask = ((await created.json()) as { data: { task_id: string } }).data.task_id;
  const flue = await fetch(`${gw.baseUrl}/flue/alpha/conv-a`, {
    method: 'POST',
    headers: { ...bearer(KEY.valid), 'content-type': 'application/json' },
    body: JSON.stringify({ kind: 'user', body: ALICE_FLUE }),
  });
  expect(flue.status).toBeLessThan(300);
  const t = await fetch(`${gw.baseUrl}/auth/tickets`, { method: 'POST', headers: bearer(KEY.valid) });
  expect(t.status).toBe(200);
  validTicket = ((await t.json()) as { ticket: string }).ticket;
  // Signed with the gateway's key, expired a minute ago.
  const authority = createTicketAuthority(TICKET_SECRET, 1000);
  expiredTicket = (
    await authority.issue(
      {
        kind: 'key',
        owner: 'alice',
        scopes: new Set(ALL),
        capsules: '*',
        keyId: 'x',
        ip: '127.0.0.1',
      },
      Date.now() - 60_000,
    )
  ).ticket;
  expiredJwt = await new SignJWT({ scope: ALL.join(' ') })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('alice')
    .setIssuer('https://id.test')
    .setAudience('murmur-gateway')
    .setIssuedAt(Math.floor(Date.now() / 1000) - 120)
    .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
    .sign(new TextEncoder().encode(JWT_SECRET));
}, 30_000);

afterAll(async () => {
  await gw?.close();
  await sim?.stop();
});

type Surface = 'native' | 'beeos' | 'flue' | 'ops';
interface Route {
  name: string;
  surface: Surface;
  method: 'GET' | 'POST';
  path: () => string;
  body?: () => unknown;
  ok: number;
  stream?: boolean;
  /** `?ticket=` accepted (GET streams and long-polls). */
  ticket?: boolean;
  /** Names a capsule: a key for other capsules gets 404. */
  capsule?: boolean;
  /** Names Alice's own task/conversation: another owner gets 404. */
  owned?: boolean;
}

const ROUTES: Route[] = [
  {
    name: 'native events',
    surface: 'native',
    method: 'GET',
    path: () => '/murmur/alpha/events',
    ok: 200,
    stream: true,
    ticket: true,
    capsule: true,
  },
  {
    name: 'native poll',
    surface: 'native',
    method: 'GET',
    path: () => '/murmur/alpha/poll?after=0&wait=0',
    ok: 200,
    ticket: true,
    capsule: true,
  },
  {
    name: 'native records',
    surface: 'native',
    method: 'GET',
    path: () => '/murmur/alpha/records?after=0',
    ok: 200,
    stream: true,
    ticket: true,
    capsule: true,
  },
  {
    name: 'native stream/watch',
    surface: 'native',
    method: 'POST',
    path: () => '/murmur/alpha/',
    body: () => ({ jsonrpc: '2.0', id: 1, method: 'stream/watch' }),
    ok: 200,
    stream: true,
    capsule: true,
  },
  {
    name: 'native tasks/get (forwarded)',
    surface: 'native',
    method: 'POST',
    path: () => '/murmur/alpha/',
    body: () => ({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id: 'nope' } }),
    ok: 200,
    capsule: true,
  },
  {
    name: 'beeos create task',
    surface: 'beeos',
    method: 'POST',
    path: () => '/api/v1/agents/alpha/tasks',
    body: () => ({ message: 'hello' }),
    ok: 202,
    capsule: true,
  },
  {
    name: 'beeos task',
    surface: 'beeos',
    method: 'GET',
    path: () => `/api/v1/agents/alpha/tasks/${aliceTask}`,
    ok: 200,
    capsule: true,
    owned: true,
  },
  {
    name: 'beeos task events',
    surface: 'beeos',
    method: 'GET',
    path: () => `/api/v1/agents/alpha/tasks/${aliceTask}/events`,
    ok: 200,
    stream: true,
    ticket: true,
    capsule: true,
    owned: true,
  },
  {
    name: 'flue read',
    surface: 'flue',
    method: 'GET',
    path: () => '/flue/alpha/conv-a?view=updates&offset=-1',
    ok: 200,
    capsule: true,
    owned: true,
  },
  {
    name: 'flue live read',
    surface: 'flue',
    method: 'GET',
    path: () => '/flue/alpha/conv-a?view=updates&offset=-1&live=sse',
    ok: 200,
    stream: true,
    ticket: true,
    capsule: true,
    owned: true,
  },
  {
    name: 'flue send',
    surface: 'flue',
    method: 'POST',
    path: () => `/flue/alpha/conv-${randomUUID()}`,
    body: () => ({ kind: 'user', body: 'hi' }),
    ok: 202,
    capsule: true,
  },
  { name: 'capsules', surface: 'ops', method: 'GET', path: () => '/capsules', ok: 200 },
  { name: 'metrics', surface: 'ops', method: 'GET', path: () => '/metrics', ok: 200 },
  { name: 'admin', surface: 'ops', method: 'GET', path: () => '/admin/capsules', ok: 200 },
];

type Cred =
  | 'none'
  | 'wrong key'
  | 'expired JWT'
  | 'other owner'
  | 'no scope'
  | 'other capsule'
  | 'valid key'
  | 'valid ticket'
  | 'expired ticket';
const CREDS: Cred[] = [
  'none',
  'wrong key',
  'expired JWT',
  'other owner',
  'no scope',
  'other capsule',
  'valid key',
  'valid ticket',
  'expired ticket',
];

const expected = (r: Route, c: Cred): number => {
  switch (c) {
    case 'none':
    case 'wrong key':
    case 'expired JWT':
    case 'expired ticket':
      return 401;
    case 'valid ticket':
      return r.ticket ? r.ok : 401;
    case 'no scope':
      return 403;
    case 'other capsule':
      return r.capsule ? 404 : r.ok;
    case 'other owner':
      return r.owned ? 404 : r.ok;
    case 'valid key':
      return r.ok;
  }
};

const call = async (r: Route, c: Cred): Promise<{ status: number; text: string; type: string }> => {
  let path = r.path();
  const headers: Record<string, string> = {};
  const token: Partial<Record<Cred, string>> = {
    'wrong key': KEY.wrong,
    'expired JWT': expiredJwt,
    'other owner': KEY.otherOwner,
    'no scope': KEY.noScope,
    'other capsule': KEY.otherCapsule,
    'valid key': KEY.valid,
  };
  if (token[c]) headers.authorization = `Bearer ${token[c]}`;
  if (c === 'valid ticket' || c === 'expired ticket') {
    const t = c === 'valid ticket' ? validTicket : expiredTicket;
    path += `${path.includes('?') ? '&' : '?'}ticket=${encodeURIComponent(t)}`;
  }
  if (r.body) headers['content-type'] = 'application/json';
  const ac = new AbortController();
  const res = await fetch(`${gw.baseUrl}${path}`, {
    method: r.method,
    headers,
    signal: ac.signal,
    ...(r.body ? { body: JSON.stringify(r.body()) } : {}),
  });
  const type = res.headers.get('content-type') ?? '';
  // A stream that opened is not read to its end: its status and headers are the answer.
  const text = type.startsWith('text/event-stream') ? '' : await res.text();
  ac.abort();
  return { status: res.status, text, type };
};

/** The refusal is in the surface's own grammar. */
const checkGrammar = (r: Route, status: number, text: string): void => {
  if (status < 400) return;
  if (r.surface === 'beeos') {
    const body = JSON.parse(text) as { success: boolean; error: { code: string; type: string } };
    expect(body.success).toBe(false);
    const codes: Record<number, string[]> = {
      401: ['missing_token', 'invalid_token'],
      403: ['forbidden'],
      404: ['not_found', 'agent_not_found'],
    };
    expect(codes[status]).toContain(body.error.code);
  } else if (r.surface === 'flue') {
    const body = JSON.parse(text) as { error: { type: string } };
    const types: Record<number, string> = { 401: 'unauthorized', 403: 'forbidden', 404: 'stream_not_found' };
    expect(body.error.type).toBe(types[status]);
  } else if (r.surface === 'native') {
    if (status === 404) expect(text).toBe('');
    else {
      const body = JSON.parse(text) as { jsonrpc: string; error: { code: number } };
      expect(body.jsonrpc).toBe('2.0');
      expect(body.error.code).toBe(status === 401 ? -32001 : -32003);
    }
  } else {
    const body = JSON.parse(text) as { error: { code: string } };
    expect(body.error.code).toBe(status === 401 ? 'unauthorized' : 'forbidden');
  }
};

describe('access matrix: route × credential', () => {
  for (const r of ROUTES) {
    it(`${r.name}`, async () => {
      const got: Record<string, number> = {};
      const want: Record<string, number> = {};
      for (const c of CREDS) {
        const { status, text } = await call(r, c);
        got[c] = status;
        want[c] = expected(r, c);
        if (status === want[c]) checkGrammar(r, status, text);
        // No read of another owner shows Alice's text.
        if (c === 'other owner' && r.owned) {
          expect(text).not.toContain(ALICE_TEXT);
          expect(text).not.toContain(ALICE_FLUE);
        }
      }
      expect(got).toEqual(want);
    });
  }

  it('open routes stay open: healthz, readyz, client module, preflight', async () => {
    for (const p of ['/healthz', '/readyz']) expect((await fetch(`${gw.baseUrl}${p}`)).status).toBe(200);
  });
});

describe('ownership where the data is', () => {
  it("a client choosing another owner's context id never sees its records", async () => {
    const inv = await fetch(`${gw.baseUrl}/api/v1/agents/alpha/invoke`, {
      method: 'POST',
      headers: { ...bearer(KEY.otherOwner), 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'bob here', context_id: 'shared-ctx' }),
    });
    expect(inv.status).toBe(200);
    const done = (await inv.json()) as { data: { task_id: string; context_id: string; text: string } };
    expect(done.data.context_id).toBe('shared-ctx');
    expect(JSON.stringify(done)).not.toContain(ALICE_TEXT);
    // A task of Bob's in the same chosen context: its stream holds nothing of Alice's.
    const created = await fetch(`${gw.baseUrl}/api/v1/agents/alpha/tasks`, {
      method: 'POST',
      headers: { ...bearer(KEY.otherOwner), 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'bob task', context_id: 'shared-ctx' }),
    });
    expect(created.status).toBe(202);
    const bobTask = ((await created.json()) as { data: { task_id: string } }).data.task_id;
    const events = await collectSse(
      `${gw.baseUrl}/api/v1/agents/alpha/tasks/${bobTask}/events`,
      bearer(KEY.otherOwner),
      (e) => e.event === 'replay_complete' || e.event === 'end',
    );
    expect(events.status).toBe(200);
    expect(JSON.stringify(events.events)).not.toContain(ALICE_TEXT);
    // Upstream, the two owners' contexts are different ones.
    const contexts = new Set(
      sim.written
        .filter((f) => f.event === 'status')
        .map((f) => (JSON.parse(f.data) as { context_id?: string }).context_id)
        .filter((c): c is string => typeof c === 'string' && c.endsWith('shared-ctx')),
    );
    expect(contexts.size).toBe(2);
  });

  it("another owner's Flue conversation of the same name is a different one", async () => {
    const send = await fetch(`${gw.baseUrl}/flue/alpha/conv-a`, {
      method: 'POST',
      headers: { ...bearer(KEY.otherOwner), 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'user', body: 'bob flue' }),
    });
    expect(send.status).toBeLessThan(300);
    const read = await fetch(`${gw.baseUrl}/flue/alpha/conv-a?view=updates&offset=-1`, {
      headers: bearer(KEY.otherOwner),
    });
    expect(read.status).toBe(200);
    const text = await read.text();
    expect(text).toContain('bob flue');
    expect(text).not.toContain(ALICE_FLUE);
  });
});
