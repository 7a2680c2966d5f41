/**
 * The Durable Streams bench's client (ds-client.ts) counts what it measures: messages are exactly
 * their size, a read's messages are counted from its bytes, and a catch-up from `-1` receives every
 * message once, on the reference server (one answer) and on the gateway (pages of at most 1,000).
 */
import { DurableStreamTestServer } from '@durable-streams/server';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import {
  appendMessages,
  catchUp,
  createStream,
  fillStream,
  keepAliveAgent,
  message,
  messageCount,
  type DsMode,
} from './ds-client.js';

describe('the Durable Streams bench counts messages exactly', () => {
  it('makes each message exactly its size, valid JSON alone and in an array', () => {
    for (const size of [64, 1024]) {
      const m = message(123, size);
      expect(m.length).toBe(size);
      expect(JSON.parse(m.toString('utf8'))).toMatchObject({ i: '0000000123' });
    }
    expect(() => message(1, 10)).toThrow('cannot hold its header');
  });

  it('counts messages from a body and refuses a body that is not whole messages', () => {
    const json = (k: number): number =>
      Buffer.from(`[${Array.from({ length: k }, (_, i) => message(i, 100).toString()).join(',')}]`).length;
    expect(messageCount('json', json(1), 100)).toBe(1);
    expect(messageCount('json', json(7), 100)).toBe(7);
    expect(messageCount('json', 2, 100)).toBe(0);
    expect(messageCount('bytes', 700, 100)).toBe(7);
    expect(() => messageCount('bytes', 701, 100)).toThrow('not whole 100-byte messages');
    expect(() => messageCount('json', json(2) + 1, 100)).toThrow('not whole messages');
  });
});

describe('a catch-up from -1 receives every message once', () => {
  let gw: TestGateway | null = null;
  let ref: DurableStreamTestServer | null = null;
  afterEach(async () => {
    await gw?.close();
    await ref?.stop();
    gw = ref = null;
  });

  /** Every message's `i`, read back page by page with fetch (sorted: concurrent appends land in any order). */
  const sequenceNumbers = async (url: string, mode: DsMode): Promise<number[]> => {
    const seen: number[] = [];
    let offset = '-1';
    for (let page = 0; page < 10; page++) {
      const res = await fetch(`${url}?offset=${offset}`);
      const body = Buffer.from(await res.arrayBuffer());
      const messages: { i: string }[] =
        mode === 'json'
          ? (JSON.parse(body.toString('utf8')) as { i: string }[])
          : Array.from({ length: body.length / 256 }, (_, k) =>
              JSON.parse(body.subarray(k * 256, (k + 1) * 256).toString('utf8')),
            );
      seen.push(...messages.map((m) => Number(m.i)));
      if (res.headers.get('stream-up-to-date') === 'true') break;
      offset = res.headers.get('stream-next-offset')!;
    }
    return seen.sort((a, b) => a - b);
  };

  const roundTrip = async (streamsUrl: string, mode: DsMode): Promise<number[]> => {
    const agent = keepAliveAgent(4);
    try {
      const url = `${streamsUrl}/bench-${mode}`;
      await createStream(agent, url, mode);
      // 2,500 messages: three pages on the gateway (1,000 each), one answer on the reference.
      await fillStream(agent, url, mode, 2400, 256);
      await appendMessages(agent, url, mode, 2400, 100, 256, 4);
      const got = await catchUp(agent, url, mode, 256, 2501);
      expect(got.messages).toBe(2500);
      // What was counted is what was stored: every message once, read back and decoded.
      expect(await sequenceNumbers(url, mode)).toEqual(Array.from({ length: 2500 }, (_, i) => i));
      return [got.messages, got.reads];
    } finally {
      agent.destroy();
    }
  };

  it('on the reference server, in one answer', async () => {
    ref = new DurableStreamTestServer({ port: 0, host: '127.0.0.1' });
    const base = await ref.start();
    expect(await roundTrip(`${base}/v1/stream`, 'json')).toEqual([2500, 1]);
    expect(await roundTrip(`${base}/v1/stream`, 'bytes')).toEqual([2500, 1]);
  });

  it('on the gateway, in pages', async () => {
    gw = await startTestGateway({ capsules: {}, extra: { durableStreams: { writable: true } } });
    expect(await roundTrip(`${gw.baseUrl}/v1/stream`, 'json')).toEqual([2500, 3]);
    expect(await roundTrip(`${gw.baseUrl}/v1/stream`, 'bytes')).toEqual([2500, 3]);
  });
});
