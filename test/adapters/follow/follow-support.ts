/**
 * Helpers of the `/v1/follow` tests: an EventSource fetch that makes its reconnects quick (and
 * carries a bearer token), a JSON GET, and the event shape every follow event has.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { startSimulator } from '../../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';

export interface FollowEventJson<T = unknown> {
  stream: string;
  cursor: string;
  event: string;
  data: T;
}

export const sha256 = (key: string): string => createHash('sha256').update(key).digest('hex');

/** The EventSource client's fetch, prepending `retry: 5` so its reconnects come quickly. */
export const quickRetryFetch =
  (token?: string): typeof fetch =>
  async (input, init) => {
    const headers = new Headers(init?.headers);
    if (token) headers.set('authorization', `Bearer ${token}`);
    const res = await fetch(input, { ...init, headers });
    if (!res.body) return res;
    const prefix = new TextEncoder().encode('retry: 5\n\n');
    const body = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({ start: (c) => c.enqueue(prefix) }),
    );
    return new Response(body, { status: res.status, headers: res.headers });
  };

export const getJson = async (url: string, token?: string) => {
  const res = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  return { status: res.status, body: (await res.json()) as unknown };
};

export const followError = (status: number, code: string, message: string) => ({
  status,
  body: { error: { code, message } },
});

export interface LongPoll<T = unknown> {
  events: FollowEventJson<T>[];
  cursors: Record<string, string>;
}

/** One simulated capsule `cap0` behind a gateway with two owners' keys (alice, bob) and a 2 s long-poll. */
const startTwoOwners = async (
  alice: string,
  bob: string,
): Promise<{ gw: TestGateway; close(): Promise<void> }> => {
  const sim = await startSimulator({ heartbeatMs: 200, taskAcceptance: 'queue' });
  const gw = await startTestGateway({
    capsules: { cap0: sim.url },
    config: {
      longPollMaxMs: 2_000,
      apiKeys: [
        { sha256: sha256(alice), owner: 'alice' },
        { sha256: sha256(bob), owner: 'bob' },
      ],
    },
  });
  return {
    gw,
    close: async () => {
      await gw.close();
      await sim.stop();
    },
  };
};

/** `startTwoOwners` for the whole test file: started before its first test, closed after its last. */
export const twoOwnersForFile = (alice: string, bob: string): (() => TestGateway) => {
  let started: { gw: TestGateway; close(): Promise<void> } | null = null;
  beforeAll(async () => {
    started = await startTwoOwners(alice, bob);
  });
  afterAll(() => started?.close());
  return () => {
    if (!started) throw new Error('the gateway starts in beforeAll: use it inside a test');
    return started.gw;
  };
};
