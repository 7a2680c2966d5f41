/**
 * Long-polls and Flue live reads tie each request to the gateway's shutdown signal. That link must be
 * undone when the request ends: `AbortSignal.any` on Node 20 kept one dependant per request on the
 * long-lived shutdown signal, forever. Counted on the signal itself after many requests.
 */
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { createFlueClient } from '@flue/sdk';
import { gatewayForFile } from '../support/gateway-for-file.js';
import { scaled } from '../support/deadlines.js';

const rig = gatewayForFile({
  gateway: { config: { longPollMaxMs: 50, idleControlMs: 50, heartbeatMs: 1000 } },
});

/** Composite signals Node keeps on a source signal (an internal set; 0 where Node has none). */
const dependants = (signal: AbortSignal): number => {
  const sym = Object.getOwnPropertySymbols(signal).find((s) => s.description === 'kDependantSignals');
  const set = sym ? (signal as unknown as Record<symbol, { size: number } | undefined>)[sym] : undefined;
  return set?.size ?? 0;
};

const held = (signal: AbortSignal) => ({
  listeners: getEventListeners(signal, 'abort').length,
  dependants: dependants(signal),
});

const N = 25;

describe('the shutdown signal after many requests', () => {
  it('holds nothing from finished native polls, Flue long-polls and Flue SSE reads', async () => {
    const base = `${rig.gw.baseUrl}/flue/cap/leak`;
    const client = createFlueClient({ url: base });
    await client.wait(await client.send({ message: { kind: 'user', body: 'hi' } }));
    const head = await fetch(base, { method: 'HEAD' });
    const offset = head.headers.get('stream-next-offset')!;
    const { head: logHead } = await rig.gw.core.position('cap');
    const before = held(rig.gw.core.shutdownSignal);

    for (let i = 0; i < N; i++) {
      // Parks at the head and times out: the wait path that links the signals.
      const poll = await fetch(`${rig.gw.baseUrl}/murmur/cap/poll?after=${logHead}&wait=0.05`);
      expect(poll.status).toBe(200);
      await poll.text();
      const lp = await fetch(`${base}?view=updates&offset=${offset}&live=long-poll`);
      expect(lp.status).toBe(200);
      expect(await lp.json()).toEqual([]);
    }
    for (let i = 0; i < N; i++) {
      // A client that reads one control event and leaves.
      const ac = new AbortController();
      const sse = await fetch(`${base}?view=updates&offset=${offset}&live=sse`, { signal: ac.signal });
      const reader = sse.body!.getReader();
      let text = '';
      while (!text.includes('event: control')) text += new TextDecoder().decode((await reader.read()).value);
      ac.abort();
      await reader.cancel().catch(() => undefined);
    }
    // The server notices a gone SSE client on its next write: at most one idle-control period.
    const deadline = Date.now() + scaled(5_000);
    while (held(rig.gw.core.shutdownSignal).listeners > before.listeners && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 25));

    expect(held(rig.gw.core.shutdownSignal)).toEqual(before);
  });
});
