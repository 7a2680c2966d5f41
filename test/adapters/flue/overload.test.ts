/**
 * Overload is bounded on the Flue surface: an SSE client that stops reading (its TCP socket paused,
 * so the kernel buffers fill for real) while its conversation grows is ended once the gateway holds
 * more than the transport's byte bound for it (the stream just ends, as a cut connection would);
 * reconnecting from its last `control` offset it receives every chunk, none missing. A client that
 * keeps up on the same conversation meanwhile receives everything on its one connection.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createFlueClient } from '@flue/sdk';
import type { FlueChunk } from '../../../adapters/flue/chunks.js';
import { SSE_DEFAULTS, sseStats } from '../../../src/http/sse-transport.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { startTestGateway } from '../../support/gateway.js';
import { SseReader, offsetNumber, wholeCapsuleChunks } from './live-clients.js';
import { rawSseSocket } from '../../support/raw-sse-socket.js';

const saved = { ...SSE_DEFAULTS };
const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  Object.assign(SSE_DEFAULTS, saved);
  for (const close of closers.splice(0).reverse()) await close();
});

/** Complete SSE blocks of a close-delimited body (a block cut by the end is not an event). */
const blocksOf = (raw: string): string[] =>
  raw
    .slice(raw.indexOf('\r\n\r\n') + 4)
    .split('\n\n')
    .slice(0, -1);

const key = (c: FlueChunk): string => `${c.position.batch}:${c.position.index}`;

describe('flue surface: a slow SSE reader is ended past the byte bound and resumes exactly', () => {
  it('ends a client that stopped reading; its last control offset then delivers the rest', async () => {
    SSE_DEFAULTS.maxQueuedBytes = 64 * 1024;
    const sim = await startSimulator();
    closers.push(() => sim.stop());
    const gw = await startTestGateway({
      capsules: { cap: sim.url },
      config: { idleControlMs: 100, heartbeatMs: 1_000 },
    });
    closers.push(() => gw.close());
    const url = `${gw.baseUrl}/flue/cap/slow`;
    const client = createFlueClient({ url });
    await client.wait(await client.send({ message: { kind: 'user', body: 'hi' } }));
    const start = (await fetch(url, { method: 'HEAD' })).headers.get('stream-next-offset')!;

    const slow = rawSseSocket(`${url}?view=updates&offset=${start}&live=sse`);
    await slow.until(() => slow.text().includes('event: control'));
    const keeping = new SseReader(url, start);
    closers.push(() => keeping.close());
    await keeping.reached(offsetNumber(start));
    const overflowsBefore = sseStats().overflows;
    slow.socket.pause();

    // A task of this conversation streaming big chunks, until the gateway lets go of the slow client
    // (bounded: without a byte bound it never does).
    const frame = (event: string, data: Record<string, unknown>) =>
      gw.gateway.writer.append('cap', {
        kind: 'frame',
        event,
        upstreamId: null,
        data: JSON.stringify(data),
        receivedAt: Date.now(),
      });
    await frame('status', {
      id: 'tsk_big',
      context_id: 'slow',
      status: { state: 'working', message: 'inference turn 1' },
      final: false,
    });
    let last = 0;
    for (let i = 0; i < 2000 && sseStats().overflows === overflowsBefore; i++) {
      last = (await frame('text', { id: 'tsk_big', text: `${i} ${'y'.repeat(8000)}`, final: false })).offset;
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(sseStats().overflows).toBe(overflowsBefore + 1);
    last = (
      await frame('status', {
        id: 'tsk_big',
        context_id: 'slow',
        status: { state: 'completed', message: 'done', response: 'ok' },
        final: true,
      })
    ).offset;

    slow.socket.resume();
    await slow.closed;
    const blocks = blocksOf(slow.text());
    const controls = blocks.filter((b) => b.startsWith('event: control'));
    const resumeAt = (
      JSON.parse(controls[controls.length - 1]!.split('\ndata:')[1]!) as { streamNextOffset: string }
    ).streamNextOffset;
    const first = blocks
      .filter((b) => b.startsWith('event: data'))
      .flatMap((b) => JSON.parse(b.split('\ndata:')[1]!) as FlueChunk[]);
    expect(offsetNumber(resumeAt)).toBeLessThan(last);

    const again = new SseReader(url, resumeAt);
    closers.push(() => again.close());
    await again.reached(last);
    await keeping.reached(last);
    // At least once across the cut (a data event whose control did not arrive is sent again):
    // deduplicated by position, as the SDK does, nothing is missing and nothing is extra.
    const seen = new Set<string>();
    const merged = [...first, ...again.chunks].filter((c) => !seen.has(key(c)) && seen.add(key(c)));
    const expected = await wholeCapsuleChunks(gw.core, 'cap', 'slow', offsetNumber(start), last);
    expect(merged).toEqual(expected);
    expect(keeping.chunks).toEqual(expected);
    expect(keeping.ended).toBe(false);
  }, 60_000);
});
