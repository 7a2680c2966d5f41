/**
 * No internal message is echoed: with Redis frozen (SIGSTOP), every surface's reads and
 * submissions fail with a 503 whose body is that surface's fixed text for the error code, never the
 * core error's own message (`redis: Command timed out`, `log store unavailable: submission not
 * recorded`, …), which goes to the log only. Bodies are asserted exactly.
 */
import { describe, expect, it } from 'vitest';
import { postJson } from '../support/http-json.js';
import { FAST_SUBMIT_TIMEOUT, startRedisGateway } from '../support/redis-gateway.js';
import { redisServerAvailable } from '../support/redis-server.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';

const INTERNAL = /redis|timed out|command|ECONN|submission not recorded|stream|127\.0\.0\.1/i;

/** Status and body text; the body must name nothing internal. */
const answer = async (res: Response): Promise<{ status: number; body: string }> => {
  const body = await res.text();
  return { status: res.status, body };
};

describe.skipIf(!haveRedis)('no internal message echoed while Redis is frozen', () => {
  it('answers each surface’s fixed 503 body for reads and submissions', async () => {
    const { redis, gw } = await startRedisGateway({ gateway: { tuning: FAST_SUBMIT_TIMEOUT } });
    const base = gw.baseUrl;
    const api = `${base}/api/v1/agents/cap`;
    // A conversation to post a turn to, and a Flue conversation to read, made before the freeze.
    const opened = await postJson(`${api}/conversations`, {});
    expect(opened.status).toBe(201);
    const conversationId = ((await opened.json()) as { data: { conversation_id: string } }).data
      .conversation_id;

    redis.pause();
    const [poll, records, native, invoke, turn, flueSubmit] = await Promise.all([
      fetch(`${base}/murmur/cap/poll?after=0`).then(answer),
      fetch(`${base}/murmur/cap/records?after=0`).then(answer),
      postJson(`${base}/murmur/cap/`, {
        jsonrpc: '2.0',
        id: 7,
        method: 'message/stream',
        params: { message: { messageId: 'm1', role: 'user', parts: [{ text: 'x' }], contextId: 'c1' } },
      }).then(answer),
      postJson(`${api}/invoke`, { message: 'lost invoke' }, { 'x-request-id': 'rid-invoke' }).then(answer),
      postJson(
        `${api}/conversations/${conversationId}/messages`,
        { message: 'lost turn' },
        { 'x-request-id': 'rid-turn' },
      ).then(answer),
      postJson(`${base}/flue/cap/conv-1`, { kind: 'user', body: 'lost flue' }).then(answer),
    ]);
    const flueRead = await fetch(`${base}/flue/cap/conv-1?view=updates&offset=-1`).then(answer);

    for (const [name, a] of Object.entries({ poll, records, native, invoke, turn, flueSubmit, flueRead }))
      expect(a.body, `${name} echoes an internal message`).not.toMatch(INTERNAL);

    const storeDown = {
      status: 503,
      body: JSON.stringify({ error: { code: 'store_unavailable', message: 'log store unavailable' } }),
    };
    expect(poll).toEqual(storeDown);
    expect(records).toEqual(storeDown);
    expect(native).toEqual({
      status: 503,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        error: { code: -32603, message: 'log store unavailable' },
      }),
    });
    for (const [a, rid] of [
      [invoke, 'rid-invoke'],
      [turn, 'rid-turn'],
    ] as const)
      expect(a).toEqual({
        status: 503,
        body: JSON.stringify({
          success: false,
          error: {
            type: 'service_unavailable_error',
            code: 'agent_service_unavailable',
            message: 'log store unavailable, retry later',
            request_id: rid,
          },
        }),
      });
    const flueDown = {
      status: 503,
      body: JSON.stringify({
        error: { type: 'runtime_unavailable', message: 'capsule or store unavailable, retry', details: '' },
      }),
    };
    expect(flueSubmit).toEqual(flueDown);
    expect(flueRead).toEqual(flueDown);
  });
});
