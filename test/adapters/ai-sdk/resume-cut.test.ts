/**
 * A turn whose connection is cut mid-stream, resumed by the same client (`resumeStream`) through a
 * proxy that cuts again: it ends with the same assistant message as an uncut turn of the same
 * script — no duplicated part, no second assistant message — and the gateway's history agrees.
 */
import { afterEach, expect, it } from 'vitest';
import type { UIMessage } from 'ai';
import { startByteCutProxy, type ByteCutProxy } from './byte-cut-proxy.js';
import { gatewayChat } from './node-chat.js';
import { testRedisUrl } from '../../support/redis.js';
import { history, plain, startChatRig, type ChatRig } from './rig.js';

let rig: ChatRig | undefined;
let proxy: ByteCutProxy | undefined;
afterEach(async () => {
  await proxy?.close();
  await rig?.close();
  proxy = rig = undefined;
});

const SCRIPT = '#sim {"thinking":2,"tools":1,"chunks":30}';

/** A message without what differs between two runs of one script (ids minted from offsets). */
const shape = (m: UIMessage) => ({
  role: m.role,
  parts: m.parts.map((p) => {
    const { id: _id, ...rest } = p as { id?: string };
    return rest;
  }),
});

const redisUrl = testRedisUrl();

it.each(['memory', 'redis'] as const)(
  '%s store: a cut turn resumed through a cutting proxy ends as the uncut turn does',
  async (store) => {
    if (store === 'redis' && !redisUrl) {
      if (process.env.REQUIRE_REDIS === '1') throw new Error('Redis required');
      return;
    }
    rig = await startChatRig({
      sim: { frameDelayMs: 15, release: '0.6' },
      redisUrl: store === 'redis' ? redisUrl : undefined,
    });
    const uncut = gatewayChat(rig.api, 'uncut');
    await uncut.sendMessage({ text: SCRIPT });
    const expected = uncut.snapshot().messages;

    // The POST is cut after ~1 KiB of its answer, the first resume after ~2 KiB; then it goes through.
    proxy = await startByteCutProxy(rig.gw.baseUrl, [1024, 2048]);
    const api = `${proxy.url}/ai-sdk/${rig.capsule}/chat`;
    const chat = gatewayChat(api, 'cut', { onError: () => undefined });
    await chat.sendMessage({ text: SCRIPT });
    expect(proxy.cuts).toBe(1);
    const partial = chat.snapshot().messages;
    expect(partial).toHaveLength(2);
    expect(finished(partial)).toBe(false);
    // Node reports the cut as `terminated`, which the chat does not class as a disconnect: resume by hand.
    for (let attempt = 0; attempt < 4 && !finished(chat.snapshot().messages); attempt++)
      await chat.resumeStream();
    const messages = chat.snapshot().messages;
    expect(proxy.cuts).toBe(2);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(messages[1]!.id).toBe(partial[1]!.id);
    expect(messages.map(shape).slice(1)).toEqual(expected.map(shape).slice(1));
    expect(await history(rig.api, 'cut')).toEqual(plain(messages));
  },
);

/** The reply's text is all there and done. */
const finished = (messages: UIMessage[]): boolean =>
  messages
    .at(-1)
    ?.parts.some((p) => p.type === 'text' && p.state === 'done' && p.text.endsWith('chunk 30')) ?? false;
