/**
 * A Flue SSE follower is told about its own conversation's read cycles, not every batch of the
 * capsule: records of other conversations (another Flue conversation, native tasks) pass without a
 * control event each, and the offset they moved rides the next control (data, an up-to-date change,
 * or the idle one). Before, every batch of any context made a control for every follower of every
 * conversation, so a busy capsule's Flue fan-out cost one write per follower per batch.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createFlueClient } from '@flue/sdk';
import { startSimulator } from '../../../src/simulator/index.js';
import { startTestGateway } from '../../support/gateway.js';
import { uniqueCapsule } from '../../support/redis.js';
import { SseReader } from './live-clients.js';

const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

describe('Flue SSE controls', () => {
  it('records of other conversations make no control per batch; the offset rides the next one', async () => {
    const sim = await startSimulator({ taskAcceptance: 'queue', frameDelayMs: 1 });
    closers.push(() => sim.stop());
    const capsule = uniqueCapsule('flue-controls');
    const gw = await startTestGateway({
      capsules: { [capsule]: sim.url },
      config: { idleControlMs: 150, heartbeatMs: 50 },
    });
    closers.push(() => gw.close());
    const url = (conv: string): string => `${gw.baseUrl}/flue/${capsule}/${conv}`;
    const quiet = createFlueClient({ url: url('quiet') });
    await quiet.wait(await quiet.send({ message: { kind: 'user', body: 'hello' } }));
    await sim.idle();
    const head = (await fetch(url('quiet'), { method: 'HEAD' })).headers.get('stream-next-offset')!;
    const reader = new SseReader(url('quiet'), head);
    closers.push(() => reader.close());

    // Another conversation's turn and a native task of another context: many batches.
    const busy = createFlueClient({ url: url('busy') });
    const native = sim.submit('#sim {"chunks":40,"delayMs":2}', 'native-ctx');
    await busy.wait(await busy.send({ message: { kind: 'user', body: '#sim {"chunks":40,"delayMs":2}' } }));
    await native.done;
    await sim.idle();
    const end = (await gw.core.position(capsule)).head;
    const passed = end - Number(head.split('_')[1]);
    expect(passed).toBeGreaterThan(80);
    // The follower learns the new offset (from the idle control) without a chunk of its own.
    await reader.reached(end);
    expect(reader.chunks).toEqual([]);
    const controls = reader.events.filter((e) => e === 'control').length;
    // Idle controls (every 150 ms of quiet) and up-to-date changes only: far fewer than the batches.
    expect(controls).toBeLessThan(passed / 4);
  });
});
