/**
 * Submissions made while the store cannot record them (Redis frozen with SIGSTOP): each surface
 * answers its own "unavailable" error once the core's submit timeout passes, the capsule never
 * receives the task, and once Redis is back the log and the projections hold nothing inconsistent:
 * a submission that became durable late is followed by a `submission-failed` fact, and the next
 * message of the same conversation is paired with its own reply, not with the failed one.
 */
import { describe, expect, it } from 'vitest';
import type { LogRecord } from '../../src/log/record.js';
import type { SimulatedCapsule } from '../../src/simulator/index.js';
import type { TestGateway } from '../support/gateway.js';
import { postJson } from '../support/http-json.js';
import { FAST_SUBMIT_TIMEOUT, startRedisGateway } from '../support/redis-gateway.js';
import { redisServerAvailable } from '../support/redis-server.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';

/** Every record of the capsule's log (small logs only). */
const allRecords = async (gateway: TestGateway, capsule: string): Promise<LogRecord[]> => {
  const out: LogRecord[] = [];
  let after = 0;
  for (;;) {
    const { records } = await gateway.core.read(capsule, after, 1000);
    if (records.length === 0) return out;
    out.push(...records);
    after = records[records.length - 1]!.offset;
  }
};

/** Context ids of the tasks the capsule started (its first status frame carries the context). */
const capsuleContexts = (s: SimulatedCapsule): string[] =>
  s.written
    .filter((f) => f.event === 'status')
    .map((f) => (JSON.parse(f.data) as { context_id?: string }).context_id)
    .filter((c): c is string => typeof c === 'string');

describe.skipIf(!haveRedis)('a submission while Redis is frozen', () => {
  it('fails with each surface’s unavailable error, is never forwarded, and leaves the log consistent', async () => {
    const { redis, sim, gw } = await startRedisGateway({ gateway: { tuning: FAST_SUBMIT_TIMEOUT } });
    const api = `${gw.baseUrl}/api/v1/agents/cap`;
    const opened = await postJson(`${api}/conversations`, {});
    expect(opened.status).toBe(201);
    const conversationId = ((await opened.json()) as { data: { conversation_id: string } }).data
      .conversation_id;
    const convContext = (
      (await (await fetch(`${api}/conversations/${conversationId}`)).json()) as {
        data: { context_id: string };
      }
    ).data.context_id;

    redis.pause();
    const [native, invoke, turn, flue] = await Promise.all([
      postJson(`${gw.baseUrl}/murmur/cap/`, {
        jsonrpc: '2.0',
        id: 7,
        method: 'message/stream',
        params: {
          message: {
            messageId: 'm-native',
            role: 'user',
            parts: [{ text: 'lost' }],
            contextId: 'ctx-native',
          },
        },
      }),
      postJson(`${api}/invoke`, { message: 'lost invoke', context_id: 'ctx-invoke' }),
      postJson(`${api}/conversations/${conversationId}/messages`, { message: 'lost turn' }),
      postJson(`${gw.baseUrl}/flue/cap/ctx-flue`, { kind: 'user', body: 'lost flue' }),
    ]);

    // Native: the JSON-RPC error of an unavailable store, never a stream.
    expect(native.status).toBe(503);
    expect(native.headers.get('content-type')).toContain('application/json');
    expect(await native.json()).toEqual({
      jsonrpc: '2.0',
      id: 7,
      error: { code: -32603, message: 'log store unavailable' },
    });
    // BeeOS: 503 agent_service_unavailable in its envelope, for invoke and a conversation turn.
    for (const res of [invoke, turn]) {
      expect(res.status).toBe(503);
      const body = (await res.json()) as { success: boolean; error: Record<string, unknown> };
      expect(body.success).toBe(false);
      expect(body.error).toMatchObject({
        type: 'service_unavailable_error',
        code: 'agent_service_unavailable',
      });
    }
    // Flue: 503 runtime_unavailable with Retry-After (transient: the SDK retries).
    expect(flue.status).toBe(503);
    expect(flue.headers.get('retry-after')).toBe('1');
    expect(((await flue.json()) as { error: { type: string } }).error.type).toBe('runtime_unavailable');

    redis.resume();
    await gw.gateway.writer.flush();
    // Reads are served again once the replica finds the store reachable (/readyz says so).
    for (let i = 0; i < 100 && (await fetch(`${gw.baseUrl}/readyz`)).status !== 200; i++)
      await new Promise((r) => setTimeout(r, 50));

    // Whatever of them reached the log is followed by its submission-failed fact.
    const log = await allRecords(gw, 'cap');
    const lost = new Set(['ctx-native', 'ctx-invoke', convContext, 'ctx-flue']);
    const submitted = log.filter(
      (r): r is LogRecord & { kind: 'submission' } =>
        r.kind === 'submission' && lost.has(r.contextId) && r.text !== '',
    );
    // Surfaces that read the store before submitting fail at that read and never reach the writer;
    // a submission that did (in flight to the frozen Redis: ambiguous, durable late) is followed by
    // its submission-failed fact. The core-level test below always takes that path.
    for (const s of submitted) {
      const failed = log.find(
        (r) => r.kind === 'fact' && r.fact === 'submission-failed' && r.messageId === s.messageId,
      );
      expect(failed, `submission-failed for ${s.text}`).toBeDefined();
      expect(failed!.offset).toBeGreaterThan(s.offset);
    }

    // The next turn of the conversation runs and is answered in reply to itself, not the lost one.
    const next = await postJson(`${api}/conversations/${conversationId}/messages`, { message: 'second' });
    expect(next.status).toBe(202);
    const nextId = ((await next.json()) as { data: { message_id: string } }).data.message_id;
    const events = await fetch(`${api}/conversations/${conversationId}/events`, {
      headers: { Accept: 'text/event-stream' },
    });
    const reader = events.body!.getReader();
    let text = '';
    while (!/"state":"completed","stop_reason":"end_turn"|"stop_reason":"end_turn"/.test(text)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the conversation's stream ended before the reply:\n${text}`);
      text += new TextDecoder().decode(value);
    }
    await reader.cancel();
    const envelopes = text
      .split('\n')
      .filter((l) => l.startsWith('data: {') || l.startsWith('data:{'))
      .map((l) => JSON.parse(l.slice(l.indexOf('{'))) as Record<string, unknown>)
      .filter((e) => typeof e.type === 'string');
    const replies = envelopes.filter((e) => e.type === 'agent_reply');
    expect(replies.length).toBeGreaterThan(0);
    for (const r of replies) expect(r.in_reply_to).toBe(nextId);
    const lostTurn = envelopes.find(
      (e) => e.type === 'chat_message' && e.payload && (e.payload as { text: string }).text === 'lost turn',
    );
    if (lostTurn) {
      // It reached the log late: its stream says it failed, in reply to it.
      const error = envelopes.find(
        (e) => e.type === 'agent_reply_error' && e.in_reply_to === lostTurn.message_id,
      );
      expect(error).toMatchObject({ state: 'failed', payload: { code: 'agent_service_unavailable' } });
    }

    // The capsule never received any of the failed submissions.
    await sim.idle();
    const contexts = capsuleContexts(sim);
    for (const c of ['ctx-native', 'ctx-invoke', 'ctx-flue']) expect(contexts).not.toContain(c);
    const convTasks = sim.written.filter(
      (f) =>
        f.event === 'status' && (JSON.parse(f.data) as { context_id?: string }).context_id === convContext,
    );
    expect(new Set(convTasks.map((f) => (JSON.parse(f.data) as { id: string }).id)).size).toBe(1);
  }, 30_000);
});

describe.skipIf(!haveRedis)('a submission whose record is in flight when its timeout passes', () => {
  it('is answered unavailable, never forwarded, and its late record is followed by submission-failed', async () => {
    const { redis, sim, gw } = await startRedisGateway({ gateway: { tuning: FAST_SUBMIT_TIMEOUT } });
    // Nothing else queued for the capsule (one batch in flight per capsule): the record's batch is
    // the one sent to the frozen Redis.
    await gw.gateway.writer.flush();
    redis.pause();
    // Straight to the core: the record's batch is sent to the frozen Redis at once (in flight, so it
    // cannot be withdrawn), then the timeout passes.
    const outcome = await gw.core
      .submit('cap', {
        text: 'lost in flight',
        contextId: 'ctx-in-flight',
        messageId: 'm-in-flight',
        record: { protocol: 'murmur', owner: null },
      })
      .then(
        () => 'submitted',
        (err: unknown) => (err as { code?: string }).code,
      );
    expect(outcome).toBe('store_unavailable');
    redis.resume();
    await gw.gateway.writer.flush();

    const log = await allRecords(gw, 'cap');
    const record = log.find((r) => r.kind === 'submission' && r.messageId === 'm-in-flight');
    expect(record).toBeDefined();
    const failed = log.find(
      (r) => r.kind === 'fact' && r.fact === 'submission-failed' && r.messageId === 'm-in-flight',
    );
    expect(failed?.offset).toBeGreaterThan(record!.offset);
    // Never forwarded: the capsule started no task in that context.
    await sim.submit('after').done;
    expect(capsuleContexts(sim)).not.toContain('ctx-in-flight');
  });
});
