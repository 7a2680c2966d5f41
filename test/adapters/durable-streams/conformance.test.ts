/**
 * The protocol's own server conformance suite (`@durable-streams/server-conformance-tests`) against
 * the whole gateway over loopback HTTP, on the embedded store and on a real redis-server. Every
 * case must pass except those in `EXPECTED_FAILURES` (conformance-expectations.ts), which must fail.
 */
import { afterAll, beforeAll, beforeEach, describe } from 'vitest';
import { runConformanceTests } from '@durable-streams/server-conformance-tests';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { testRedisUrl } from '../../support/redis.js';
import { expectListedFailures, STORE_SUITE_PREFIX } from './conformance-expectations.js';

/** The gateway's `downstream.longPollMaxMs` for this run: it bounds this surface's long-poll too. */
const LONG_POLL_MS = 2_000;

const suiteAgainst = (store: 'embedded' | 'redis', redisUrl: string | undefined): void => {
  // `subscriptions`: the suite's opt-in group runs too, so its cases are listed, not skipped.
  const options = { baseUrl: '', longPollTimeoutMs: LONG_POLL_MS, subscriptions: true };
  let gw: TestGateway | null = null;
  beforeAll(async () => {
    gw = await startTestGateway({
      capsules: {},
      ...(redisUrl ? { redisUrl } : {}),
      // The default CORS settings (no origins): the suite's preflight case passes without them too.
      config: { longPollMaxMs: LONG_POLL_MS },
      // Loopback receivers: the suite's webhook receivers listen on 127.0.0.1.
      extra: { durableStreams: { writable: true }, webhooks: { allowLoopback: true } },
      tuning: { streams: { keyPrefix: `test:ds:conformance:${store}:${Date.now()}` } },
    });
    options.baseUrl = gw.baseUrl;
  });
  afterAll(async () => {
    await gw?.close();
  });
  expectListedFailures({ beforeEach, afterAll });
  runConformanceTests(options);
};

describe(`${STORE_SUITE_PREFIX}, embedded store`, () => {
  suiteAgainst('embedded', undefined);
});

// Skipped only when no Redis was started AND it is not required; under REQUIRE_REDIS=1 it fails.
const redisUrl = testRedisUrl();
describe.skipIf(!redisUrl && process.env.REQUIRE_REDIS !== '1')(`${STORE_SUITE_PREFIX}, Redis`, () => {
  if (!redisUrl) throw new Error('REQUIRE_REDIS=1 but no test Redis is available');
  suiteAgainst('redis', redisUrl);
});
