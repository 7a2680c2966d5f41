/** The channel registry is rebuilt from the log: a fresh BeeOS app over the same log knows every channel. */
import pino from 'pino';
import { afterEach, expect, it } from 'vitest';
import { createBeeosRoutes } from '../../../adapters/beeos/index.js';
import { hashApiKey } from '../../support/api-keys.js';
import { KEY_ALICE, KEY_BOB, startHarness, withAuth } from './support/harness.js';
import type { Harness } from './support/harness.js';

let h: Harness;
afterEach(async () => h?.close());

it('after a restart, owners, idempotency keys and closed conversations come back from the log', async () => {
  h = await startHarness({ keys: true });
  const base = `/api/v1/agents/${h.capsule}`;
  const post = (path: string, body: unknown, key = KEY_ALICE) =>
    fetch(`${h.baseUrl}${base}${path}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
      body: JSON.stringify(body),
    });
  const task = (
    (await (await post('/tasks', { message: 'm', idempotency_key: 'k' })).json()) as {
      data: { task_id: string };
    }
  ).data.task_id;
  const conv = ((await (await post('/conversations', {})).json()) as { data: { conversation_id: string } })
    .data.conversation_id;
  await fetch(`${h.baseUrl}${base}/conversations/${conv}`, {
    method: 'DELETE',
    headers: { Authorization: `Bearer ${KEY_ALICE}` },
  });

  const keys = [
    { sha256: hashApiKey(KEY_ALICE), owner: 'alice' },
    { sha256: hashApiKey(KEY_BOB), owner: 'bob' },
  ];
  const restarted = withAuth(
    keys,
    createBeeosRoutes({
      core: h.core,
      config: {
        heartbeatMs: 15_000,
        longPollMaxMs: 30_000,
        idleControlMs: 30_000,
        bodyLimitBytes: 1 << 20,
        publicUrl: null,
        maxQueuedRecords: 1000,
      },
      logger: pino({ level: 'silent' }),
    }) as never,
  );
  const as = (key: string) => ({ headers: { Authorization: `Bearer ${key}` } });
  expect((await restarted.request(`${base}/tasks/${task}`, as(KEY_ALICE))).status).toBe(200);
  expect((await restarted.request(`${base}/tasks/${task}`, as(KEY_BOB))).status).toBe(404);
  const again = await restarted.request(`${base}/tasks`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY_ALICE}` },
    body: JSON.stringify({ message: 'm', idempotency_key: 'k' }),
  });
  expect(((await again.json()) as { data: { task_id: string } }).data.task_id).toBe(task);
  const info = await restarted.request(`${base}/conversations/${conv}`, as(KEY_ALICE));
  expect(((await info.json()) as { data: { state: string } }).data.state).toBe('closed');
});
