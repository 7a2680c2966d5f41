/**
 * Shared set-up of the Flue rule tests: one gateway in front of one simulated capsule with short
 * intervals, raw-fetch helpers and the exact error-envelope assertion.
 */
import { expect } from 'vitest';
import { createFlueClient } from '@flue/sdk';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';

export interface RuleFixture {
  sim: SimulatedCapsule;
  gw: TestGateway;
  /** `${baseUrl}/flue/cap` */
  base: string;
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
  /** A conversation with one completed message; returns its admission. */
  created(conv: string): Promise<{ offset: string; submissionId: string; streamUrl: string }>;
  close(): Promise<void>;
}

export const startRuleFixture = async (): Promise<RuleFixture> => {
  const sim = await startSimulator();
  const gw = await startTestGateway({
    capsules: { cap: sim.url },
    config: { longPollMaxMs: 200, idleControlMs: 150, heartbeatMs: 100, bodyLimitBytes: 4096 },
  });
  const base = `${gw.baseUrl}/flue/cap`;
  return {
    sim,
    gw,
    base,
    post: (path, body, headers = {}) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    created: async (conv) => {
      const client = createFlueClient({ url: `${base}/${conv}` });
      const admission = await client.send({ message: { kind: 'user', body: 'hi' } });
      await client.wait(admission);
      return admission;
    },
    close: async () => {
      await gw.close();
      await sim.stop();
    },
  };
};

/** Assert a Flue error envelope (§Error responses) with the fixed headers; returns `error`. */
export const expectError = async (res: Response, status: number, type: string) => {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/json');
  expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  expect(res.headers.get('cross-origin-resource-policy')).toBe('cross-origin');
  const body = (await res.json()) as {
    error: { type: string; message: string; details: string; meta?: Record<string, unknown> };
  };
  expect(body.error.type).toBe(type);
  expect(typeof body.error.message).toBe('string');
  expect(typeof body.error.details).toBe('string');
  return body.error;
};
