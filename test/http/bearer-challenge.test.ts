/**
 * Every surface answers an anonymous caller with the same RFC 6750 challenge, in its own grammar:
 * bare when no credential was sent, `invalid_token` when one was sent and refused. Nothing is
 * created by a refused request.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/auth/admin-token.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

const KEY = `key-writer-${'d'.repeat(24)}`;
const BARE = 'Bearer realm="murmur-gateway"';
const REFUSED = 'Bearer realm="murmur-gateway", error="invalid_token"';
const credentials = {
  missing: {} as Record<string, string>,
  invalid: { authorization: `Bearer not-a-key-${'e'.repeat(24)}` },
};

let sim: SimulatedCapsule;
let gw: TestGateway;
beforeAll(async () => {
  sim = await startSimulator({});
  gw = await startTestGateway({
    capsules: { alpha: sim.url },
    extra: {
      auth: { apiKeys: [{ sha256: sha256Hex(KEY), owner: 'operator', scopes: ['write', 'observe'] }] },
      durableStreams: { writable: true },
    },
  });
});
afterAll(async () => {
  await gw?.close();
  await sim?.stop();
});

describe('401 challenge on every surface', () => {
  for (const [sent, challenge] of [
    ['missing', BARE],
    ['invalid', REFUSED],
  ] as const) {
    it(`native JSON-RPC, credential ${sent}`, async () => {
      const res = await fetch(`${gw.baseUrl}/murmur/alpha/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...credentials[sent] },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id: 't' } }),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe(challenge);
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(await res.json()).toEqual({
        jsonrpc: '2.0',
        id: null,
        error: { code: -32001, message: 'Unauthorized' },
      });
    });

    it(`Durable Streams general stream, credential ${sent}`, async () => {
      const url = `${gw.baseUrl}/v1/stream/challenged-${sent}`;
      const res = await fetch(url, { method: 'PUT', headers: credentials[sent] });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe(challenge);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(await res.json()).toEqual({ error: { code: 'unauthorized', message: 'credentials required' } });
      // The refused PUT created nothing.
      const head = await fetch(url, { method: 'HEAD', headers: { authorization: `Bearer ${KEY}` } });
      expect(head.status).toBe(404);
    });

    it(`Durable Streams capsule stream, credential ${sent}`, async () => {
      const res = await fetch(`${gw.baseUrl}/v1/stream/murmur/alpha?offset=-1`, {
        headers: credentials[sent],
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe(challenge);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(await res.json()).toEqual({ error: { code: 'unauthorized', message: 'credentials required' } });
    });
  }
});
