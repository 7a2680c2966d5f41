/**
 * A tenant hammering a full submission queue: the gateway as a real child process (the CLI, with
 * its process-level guard), a capsule held busy, and each bound (the owner's share, then the
 * capsule's) driven past its limit 100 times on every surface that queues — Flue messages, BeeOS
 * tasks, BeeOS conversation messages. Every request answers 429 in its surface's grammar, the
 * process stays up, nothing was admitted, and no rejection or exception went unhandled (the guard's
 * metric stays at zero: a refusal that escaped would be counted there, not crash the test).
 * Owners share one bound across surfaces: Flue messages count against the owner like BeeOS tasks.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { testRedisUrl } from '../support/redis.js';
import { freePort } from '../support/redis-server.js';

const ALICE = `oag_${'a1'.repeat(32)}`;
const BOB = `oag_${'b2'.repeat(32)}`;
const OPS = 'queue-refusals-ops-key-0123456789';
const sha = (k: string): string => createHash('sha256').update(k).digest('hex');
const REPEAT = 100;
const CONCURRENCY = 10;

const stores: [string, string | undefined][] = [
  ['embedded store', undefined],
  ['Redis', testRedisUrl()],
];

describe.each(stores)('a full submission queue (%s)', (name, redisUrl) => {
  const skip = name === 'Redis' && !redisUrl;
  let sim: SimulatedCapsule;
  let child: ChildProcess;
  let base = '';
  let output = '';
  let exitCode: number | null | undefined;

  beforeAll(async () => {
    if (skip) return;
    sim = await startSimulator({ heartbeatMs: 200, taskAcceptance: 'single' });
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'mg-queue-'));
    const file = join(dir, 'gateway.json');
    const capsule = `cap-${process.pid}-${port}`;
    writeFileSync(
      file,
      JSON.stringify({
        server: { host: '127.0.0.1', port },
        store: { redis: redisUrl ?? null },
        capsules: [{ id: capsule, url: sim.url }],
        auth: {
          apiKeys: [
            { sha256: sha(ALICE), owner: 'alice' },
            { sha256: sha(BOB), owner: 'bob' },
            { sha256: sha(OPS), owner: 'ops', scopes: ['ops'] },
          ],
        },
        queue: { maxPerCapsule: 3, maxPerOwner: 2, retryAfterMs: 4000 },
      }),
    );
    base = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', '--config', file], { stdio: 'pipe' });
    child.on('exit', (code) => (exitCode = code));
    await new Promise<void>((resolve, reject) => {
      const onData = (d: Buffer): void => {
        output += d.toString();
        // Serving (the banner) with the capsule's watch up.
        if (output.includes('"to":"connected"') && output.includes('murmur-gateway listening on')) resolve();
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', (code) => reject(new Error(`exited early with ${code}: ${output}`)));
    });
    capsulePath = capsule;
  }, 30_000);
  let capsulePath = '';

  afterAll(async () => {
    if (child && exitCode === undefined) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
    await sim?.stop();
  });

  const send = (key: string, path: string, body: unknown): Promise<Response> =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const flue = (key: string, conv: string, text: string) =>
    send(key, `/flue/${capsulePath}/${conv}`, { kind: 'user', body: text });
  const task = (key: string, text: string) =>
    send(key, `/api/v1/agents/${capsulePath}/tasks`, { message: text });
  const turn = (key: string, conversation: string, text: string) =>
    send(key, `/api/v1/agents/${capsulePath}/conversations/${conversation}/messages`, { message: text });

  /** `n` requests, `CONCURRENCY` at a time: every answer's status, Retry-After and body. */
  const hammer = async (n: number, make: (i: number) => Promise<Response>) => {
    const answers: { status: number; retryAfter: string | null; body: unknown }[] = [];
    for (let i = 0; i < n; i += CONCURRENCY) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(CONCURRENCY, n - i) }, (_, j) => make(i + j)),
      );
      for (const r of batch)
        answers.push({ status: r.status, retryAfter: r.headers.get('retry-after'), body: await r.json() });
    }
    return answers;
  };

  const flueRefusal = {
    status: 429,
    retryAfter: '4',
    body: { error: { type: 'rate_limited', message: 'too many queued messages, retry later', details: '' } },
  };
  /** BeeOS bodies carry a fresh request id each (checked for shape); everything else is fixed. */
  const beeosRefusals = (answers: Awaited<ReturnType<typeof hammer>>) =>
    answers.map((a) => {
      const body = a.body as { error: { request_id: string } };
      expect(body.error.request_id).toMatch(/^req_[0-9a-f-]{36}$/);
      return { ...a, body: { ...body, error: { ...body.error, request_id: 'req_…' } } };
    });
  const beeosRefusal = {
    status: 429,
    retryAfter: '4',
    body: {
      success: false,
      error: {
        code: 'rate_limited',
        type: 'rate_limit_error',
        message: 'too many queued messages, retry after the Retry-After delay',
        request_id: 'req_…',
      },
    },
  };

  const queueDepth = async (): Promise<number> => {
    const res = await fetch(`${base}/capsules`, { headers: { authorization: `Bearer ${OPS}` } });
    const body = (await res.json()) as { capsules: { id: string; queue_depth: number }[] };
    return body.capsules.find((c) => c.id === capsulePath)!.queue_depth;
  };
  const unexpected = async (): Promise<string[]> => {
    const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${OPS}` } });
    return (await res.text())
      .split('\n')
      .filter((l) => l.startsWith('murmur_gateway_unexpected_errors_total'));
  };

  it.skipIf(skip)(
    'each bound, 100 times on every queueing surface: 429 every time, the process up, nothing admitted',
    async () => {
      // The capsule busy with alice's first message; two more queued: alice's share is full.
      const started = once(sim, 'run');
      expect((await flue(ALICE, 'held', '#sim {"hold":true}')).status).toBe(202);
      await started;
      for (const t of ['waits 1', 'waits 2']) expect((await flue(ALICE, 'held', t)).status).toBe(202);
      expect(await queueDepth()).toBe(2);
      const conv = (await (await send(ALICE, `/api/v1/agents/${capsulePath}/conversations`, {})).json()) as {
        data: { conversation_id: string };
      };

      // The owner's bound, counted across surfaces: Flue, BeeOS tasks, BeeOS conversation turns.
      const ownerFlue = await hammer(REPEAT, (i) => flue(ALICE, `more-${i}`, 'one too many'));
      expect(ownerFlue).toEqual(Array(REPEAT).fill(flueRefusal));
      const ownerTasks = await hammer(REPEAT, () => task(ALICE, 'one too many'));
      expect(beeosRefusals(ownerTasks)).toEqual(Array(REPEAT).fill(beeosRefusal));
      const ownerTurns = await hammer(REPEAT, () => turn(ALICE, conv.data.conversation_id, 'one too many'));
      expect(beeosRefusals(ownerTurns)).toEqual(Array(REPEAT).fill(beeosRefusal));

      // Another owner still has room, until the capsule's bound is reached.
      expect((await task(BOB, 'bob waits')).status).toBe(202);
      expect(await queueDepth()).toBe(3);
      const bobConv = (await (await send(BOB, `/api/v1/agents/${capsulePath}/conversations`, {})).json()) as {
        data: { conversation_id: string };
      };
      const capsuleFlue = await hammer(REPEAT, (i) => flue(BOB, `bob-${i}`, 'one too many'));
      expect(capsuleFlue).toEqual(Array(REPEAT).fill(flueRefusal));
      const capsuleTasks = await hammer(REPEAT, () => task(BOB, 'one too many'));
      expect(beeosRefusals(capsuleTasks)).toEqual(Array(REPEAT).fill(beeosRefusal));
      const capsuleTurns = await hammer(REPEAT, () =>
        turn(BOB, bobConv.data.conversation_id, 'one too many'),
      );
      expect(beeosRefusals(capsuleTurns)).toEqual(Array(REPEAT).fill(beeosRefusal));

      // Alive, nothing admitted past the bounds, nothing unexpected on the way.
      expect(exitCode).toBeUndefined();
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect(await queueDepth()).toBe(3);
      expect(sim.runs.size).toBe(1);
      expect(await unexpected()).toEqual([
        'murmur_gateway_unexpected_errors_total{where="request"} 0',
        'murmur_gateway_unexpected_errors_total{where="rejection"} 0',
        'murmur_gateway_unexpected_errors_total{where="exception"} 0',
      ]);
      expect(output).not.toContain('unhandled rejection');
    },
    120_000,
  );
});
