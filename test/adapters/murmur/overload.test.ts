/**
 * Overload is bounded: a stream/watch client that stops reading (its TCP socket paused, so the
 * kernel buffers fill for real) while the log grows is ended once the gateway holds more than the
 * transport's byte bound for it — the spec's slow-reader signal is the connection ending, nothing
 * written — and resuming with Last-Event-ID it reads every record exactly once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SSE_DEFAULTS, sseStats } from '../../../src/http/sse-transport.js';
import { useGateways } from './fixtures.js';
import { openRaw } from './raw-client.js';
import { rawSseSocket } from '../../support/raw-sse-socket.js';

const { setup, track } = useGateways();

const saved = { ...SSE_DEFAULTS };
afterEach(() => Object.assign(SSE_DEFAULTS, saved));

const MARK = 'overload-test';

/** The raw bytes of GET …/events on a plain socket we can stop reading from. */
const rawWatch = (baseUrl: string, capsule: string) =>
  rawSseSocket(`${baseUrl}/murmur/${capsule}/events`, 'latin1');

/**
 * The body → SSE blocks that are complete (a block cut by the end is not an event). The body runs to
 * the connection's close (the Murmur wire's framing); chunked framing is undone if a server used it.
 */
const completeBlocks = (raw: string): string[] => {
  const start = raw.indexOf('\r\n\r\n');
  let body = '';
  if (!/^transfer-encoding: chunked$/im.test(raw.slice(0, start))) body = raw.slice(start + 4);
  else
    for (let i = start + 4; ;) {
      const eol = raw.indexOf('\r\n', i);
      if (eol < 0) break;
      const size = parseInt(raw.slice(i, eol), 16);
      if (!Number.isFinite(size) || size === 0) break;
      body += raw.slice(eol + 2, Math.min(raw.length, eol + 2 + size));
      i = eol + 2 + size + 2;
    }
  return body.split('\n\n').slice(0, -1);
};

const ourIds = (blocks: string[]): number[] =>
  blocks
    .filter((b) => b.includes(MARK))
    .map((b) => Number(/^id: (\d+)$/m.exec(b)?.[1]))
    .filter((n) => Number.isFinite(n));

describe('murmur surface: a slow reader is ended past the byte bound and resumes exactly', () => {
  it('ends a stream/watch client that stopped reading; Last-Event-ID then delivers every record once', async () => {
    SSE_DEFAULTS.maxQueuedBytes = 64 * 1024;
    const { gw, capsule } = await setup();
    const client = rawWatch(gw.baseUrl, capsule);
    await client.until(() => client.text().includes('event: connection-ack'));
    const overflowsBefore = sseStats().overflows;
    client.socket.pause();

    // Append until the gateway lets go of this client (bounded: the old feed never did).
    const appended: number[] = [];
    const data = JSON.stringify({ id: 'tsk_over', text: `${MARK} ${'y'.repeat(8000)}` });
    for (let i = 0; i < 4000 && sseStats().overflows === overflowsBefore; i++) {
      const r = await gw.writer.append(capsule, {
        kind: 'frame',
        event: 'text',
        upstreamId: String(i),
        data,
        receivedAt: Date.now(),
      });
      appended.push(r.offset);
      // Let the hub deliver and the transport flush between appends.
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(sseStats().overflows).toBe(overflowsBefore + 1);

    client.socket.resume();
    await client.closed;
    const raw = client.text();
    // The connection ended (closed after the last bytes, or cut after the grace): no frame names an overload.
    const blocks = completeBlocks(raw);
    expect(blocks.some((b) => b.includes('capsule-closed'))).toBe(false);
    const first = ourIds(blocks);
    expect(first.length).toBeLessThan(appended.length);
    expect(first).toEqual(appended.slice(0, first.length));

    const cursor = first.length > 0 ? first[first.length - 1]! : appended[0]! - 1;
    const again = track(
      await openRaw(`${gw.baseUrl}/murmur/${capsule}/events`, {
        headers: { 'Last-Event-ID': String(cursor) },
      }),
    );
    const last = appended[appended.length - 1]!;
    await again.waitFor(
      (s) => s.frames().some((f) => f.id === String(last)),
      'the last appended record',
      20_000,
    );
    const rest = again
      .frames()
      .filter((f) => f.data.includes(MARK))
      .map((f) => Number(f.id));
    expect([...first, ...rest]).toEqual(appended);
  });
});
