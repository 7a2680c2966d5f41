/**
 * `/capsules` with an `ops` key limited to some capsules (a key limited to some capsules
 * gets 404 for the others): it lists those capsules only, never the others' ids or upstream URLs.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

const sha = (key: string): string => createHash('sha256').update(key).digest('hex');
const ALPHA_OPS = 'alpha-only-ops-key-0123456789';
const ALL_OPS = 'all-capsules-ops-key-0123456789';

let sim: SimulatedCapsule;
let gw: TestGateway;
beforeAll(async () => {
  sim = await startSimulator();
  gw = await startTestGateway({
    capsules: { alpha: sim.url, beta: `${sim.url}/?beta`, gamma: `${sim.url}/?gamma` },
    extra: {
      auth: {
        apiKeys: [
          { sha256: sha(ALPHA_OPS), owner: 'ops-a', scopes: ['ops'], capsules: ['alpha'] },
          { sha256: sha(ALL_OPS), owner: 'ops-all', scopes: ['ops'] },
        ],
      },
    },
  });
});
afterAll(async () => {
  await gw?.close();
  await sim?.stop();
});

const list = async (key: string): Promise<{ status: number; text: string; ids: string[] }> => {
  const res = await fetch(`${gw.baseUrl}/capsules`, { headers: { authorization: `Bearer ${key}` } });
  const text = await res.text();
  const ids = res.ok ? (JSON.parse(text) as { capsules: { id: string }[] }).capsules.map((c) => c.id) : [];
  return { status: res.status, text, ids };
};

describe('/capsules filtered by the ops key’s capsules', () => {
  it('lists only the capsules the key may see', async () => {
    const limited = await list(ALPHA_OPS);
    expect(limited.status).toBe(200);
    expect(limited.ids).toEqual(['alpha']);
    expect(limited.text).not.toContain('beta');
    expect(limited.text).not.toContain('gamma');
    const all = await list(ALL_OPS);
    expect(all.status).toBe(200);
    expect(all.ids.sort()).toEqual(['alpha', 'beta', 'gamma']);
  });
});
