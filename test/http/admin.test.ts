/**
 * The admin API on a real gateway (embedded store, real HTTP): the auth matrix, every bad input with
 * its exact status and body (and the registry unchanged after it), and the admin API disabled when
 * no admin token is configured.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/auth/admin-token.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

const TOKEN = 'adm_test_token_1';
const auth = { authorization: `Bearer ${TOKEN}` };
const json = { ...auth, 'content-type': 'application/json' };

let sim: SimulatedCapsule;
let gw: TestGateway;

beforeAll(async () => {
  sim = await startSimulator();
  gw = await startTestGateway({
    capsules: { seeded: sim.url },
    extra: { auth: { adminTokens: [{ sha256: sha256Hex(TOKEN) }, { sha256: sha256Hex('other-token') }] } },
  });
});
afterAll(async () => {
  await gw?.close();
  await sim?.stop();
});

const call = async (method: string, path: string, headers: Record<string, string> = {}, body?: string) => {
  const res = await fetch(`${gw.baseUrl}${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as unknown) : null };
};
const registry = async () => (await call('GET', '/admin/capsules', auth)).body;

describe('admin API auth', () => {
  it.each([
    ['no token', {}, 'Bearer realm="murmur-gateway admin"'],
    [
      'a wrong token',
      { authorization: 'Bearer nope' },
      'Bearer realm="murmur-gateway admin", error="invalid_token"',
    ],
    [
      'another scheme',
      { authorization: `Basic ${TOKEN}` },
      'Bearer realm="murmur-gateway admin", error="invalid_token"',
    ],
    [
      'the hash itself',
      { authorization: `Bearer ${sha256Hex(TOKEN)}` },
      'Bearer realm="murmur-gateway admin", error="invalid_token"',
    ],
  ])('%s → 401 with a Bearer challenge, on every route', async (_name, headers, challenge) => {
    for (const [method, path] of [
      ['GET', '/admin/capsules'],
      ['GET', '/admin/capsules/seeded'],
      ['PUT', '/admin/capsules/x'],
      ['DELETE', '/admin/capsules/seeded'],
    ] as const) {
      const r = await call(
        method,
        path,
        { ...headers, 'content-type': 'application/json' },
        method === 'PUT' ? '{"url":"http://127.0.0.1:1/"}' : undefined,
      );
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toBe(challenge);
      expect(r.body).toEqual({
        error: { code: 'unauthorized', message: 'a valid admin token is required (Authorization: Bearer …)' },
      });
    }
    expect((await registry()) as unknown).toMatchObject({ capsules: [{ id: 'seeded' }] });
  });

  it('any configured token is accepted', async () => {
    expect((await call('GET', '/admin/capsules', { authorization: 'Bearer other-token' })).status).toBe(200);
  });
});

describe('admin API', () => {
  it('lists the seeded capsule without its door token', async () => {
    const r = await call('GET', '/admin/capsules/seeded', auth);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: 'seeded', url: sim.url, hasDoorToken: false, source: 'config' });
  });

  it('PUT creates (201), replaces (200), never returns the door token; DELETE removes (204, then 404)', async () => {
    const created = await call(
      'PUT',
      '/admin/capsules/added.1',
      json,
      JSON.stringify({ url: sim.url, doorToken: 'mur_secret' }),
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ id: 'added.1', url: sim.url, hasDoorToken: true, source: 'admin' });
    expect(JSON.stringify(await registry())).not.toContain('mur_secret');
    const replaced = await call('PUT', '/admin/capsules/added.1', json, JSON.stringify({ url: sim.url }));
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ hasDoorToken: false });
    expect((await call('DELETE', '/admin/capsules/added.1', auth)).status).toBe(204);
    expect(await call('DELETE', '/admin/capsules/added.1', auth)).toMatchObject({
      status: 404,
      body: { error: { code: 'capsule_not_found', message: 'no capsule "added.1" in the registry' } },
    });
    expect(await call('GET', '/admin/capsules/added.1', auth)).toMatchObject({ status: 404 });
  });

  const badId = {
    error: { code: 'invalid_capsule_id', message: 'capsule ids match [A-Za-z0-9][A-Za-z0-9._-]{0,63}' },
  };
  it.each([
    [
      'bad JSON',
      'new1',
      json,
      '{"url":',
      400,
      { error: { code: 'invalid_json', message: 'the body is not valid JSON' } },
    ],
    [
      'an empty body',
      'new1',
      json,
      '',
      400,
      { error: { code: 'invalid_json', message: 'the body is not valid JSON' } },
    ],
    [
      'a JSON array',
      'new1',
      json,
      '[]',
      400,
      { error: { code: 'invalid_body', message: 'Invalid input: expected object, received array' } },
    ],
    [
      'wrong content type',
      'new1',
      { ...auth, 'content-type': 'text/plain' },
      '{"url":"http://127.0.0.1:1/"}',
      415,
      { error: { code: 'unsupported_media_type', message: 'the body must be application/json' } },
    ],
    [
      'no content type',
      'new1',
      auth,
      '{"url":"http://127.0.0.1:1/"}',
      415,
      { error: { code: 'unsupported_media_type', message: 'the body must be application/json' } },
    ],
    ['a bad id', '-bad', json, '{"url":"http://127.0.0.1:1/"}', 400, badId],
    ['a too long id', 'a'.repeat(65), json, '{"url":"http://127.0.0.1:1/"}', 400, badId],
    [
      'a non-http url',
      'new1',
      json,
      '{"url":"ftp://127.0.0.1/"}',
      400,
      { error: { code: 'invalid_body', message: 'url: must be an http:// or https:// URL' } },
    ],
    [
      'a missing url',
      'new1',
      json,
      '{}',
      400,
      { error: { code: 'invalid_body', message: 'url: must be a string' } },
    ],
    [
      'an empty door token',
      'new1',
      json,
      '{"url":"http://127.0.0.1:1/","doorToken":""}',
      400,
      { error: { code: 'invalid_body', message: 'doorToken: must not be empty' } },
    ],
    [
      'an unknown field',
      'new1',
      json,
      '{"url":"http://127.0.0.1:1/","owner":"x"}',
      400,
      { error: { code: 'invalid_body', message: 'unknown field "owner"' } },
    ],
    [
      'a body too large',
      'new1',
      json,
      JSON.stringify({ url: 'http://127.0.0.1:1/', doorToken: 'x'.repeat(20_000) }),
      413,
      { error: { code: 'payload_too_large', message: 'the body exceeds 16384 bytes' } },
    ],
  ])('PUT with %s → exact error, registry unchanged', async (_name, id, headers, body, status, expected) => {
    const before = await registry();
    const r = await call('PUT', `/admin/capsules/${id}`, headers, body);
    expect(r.status).toBe(status);
    expect(r.body).toEqual(expected);
    expect(await registry()).toEqual(before);
    expect(gw.core.capsuleIds()).toEqual(['seeded']);
  });

  it.each([
    ['GET', '/admin/capsules/-bad', 400, badId],
    ['DELETE', '/admin/capsules/-bad', 400, badId],
    [
      'GET',
      '/admin/capsules/nope',
      404,
      { error: { code: 'capsule_not_found', message: 'no capsule "nope" in the registry' } },
    ],
    [
      'POST',
      '/admin/capsules',
      405,
      { error: { code: 'method_not_allowed', message: 'POST is not allowed here' } },
    ],
    [
      'DELETE',
      '/admin/capsules',
      405,
      { error: { code: 'method_not_allowed', message: 'DELETE is not allowed here' } },
    ],
    [
      'POST',
      '/admin/capsules/seeded',
      405,
      { error: { code: 'method_not_allowed', message: 'POST is not allowed here' } },
    ],
    [
      'PATCH',
      '/admin/capsules/seeded',
      405,
      { error: { code: 'method_not_allowed', message: 'PATCH is not allowed here' } },
    ],
    ['GET', '/admin/other', 404, { error: { code: 'not_found', message: 'no route for GET /admin/other' } }],
  ])('%s %s → %i, registry unchanged', async (method, path, status, expected) => {
    const before = await registry();
    const r = await call(
      method,
      path,
      json,
      method === 'GET' || method === 'DELETE' ? undefined : '{"url":"http://127.0.0.1:1/"}',
    );
    expect(r.status).toBe(status);
    expect(r.body).toEqual(expected);
    if (status === 405) expect(r.headers.get('allow')).toBeTruthy();
    expect(await registry()).toEqual(before);
  });

  it('a capsule PUT here is served on every surface; DELETE makes it 404 again', async () => {
    expect((await call('PUT', '/admin/capsules/live1', json, JSON.stringify({ url: sim.url }))).status).toBe(
      201,
    );
    expect(gw.core.hasCapsule('live1')).toBe(true);
    expect((await fetch(`${gw.baseUrl}/murmur/live1/poll?after=0`)).status).toBe(200);
    expect((await call('DELETE', '/admin/capsules/live1', auth)).status).toBe(204);
    // The embedded registry applies in order; wait for the upstream to have stopped.
    await gw.gateway.capsules.apply(await gw.gateway.registry.list());
    expect((await fetch(`${gw.baseUrl}/murmur/live1/poll?after=0`)).status).toBe(404);
  });
});

describe('admin API disabled (no admin token configured)', () => {
  it('every /admin/ route is 404, with or without a token', async () => {
    const off = await startTestGateway({ capsules: { seeded: sim.url } });
    try {
      for (const [method, path] of [
        ['GET', '/admin/capsules'],
        ['PUT', '/admin/capsules/x'],
        ['DELETE', '/admin/capsules/seeded'],
      ] as const) {
        const res = await fetch(`${off.baseUrl}${path}`, {
          method,
          headers: json,
          ...(method === 'PUT' ? { body: '{"url":"http://127.0.0.1:1/"}' } : {}),
        });
        expect(res.status).toBe(404);
        expect(await res.json()).toEqual({
          error: { code: 'not_found', message: 'the admin API is disabled: no admin token is configured' },
        });
      }
      expect(off.core.capsuleIds()).toEqual(['seeded']);
    } finally {
      await off.close();
    }
  });
});
